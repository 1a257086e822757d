"""The shared BPE vocabulary (Section 5.1): special ids, joint training, exact round trip, save/load."""

from __future__ import annotations

import pytest

from repro.data.vocab import BOS, EOS, PAD, UNK, SharedVocab
from repro.errors import DataError


@pytest.fixture(scope="module")
def multi30k(data_dir):
    en = (data_dir / "multi30k/train.en").read_text(encoding="utf-8").splitlines()[:6000]
    de = (data_dir / "multi30k/train.de").read_text(encoding="utf-8").splitlines()[:6000]
    test_en = (data_dir / "multi30k/test_2016_flickr.en").read_text(encoding="utf-8").splitlines()
    test_de = (data_dir / "multi30k/test_2016_flickr.de").read_text(encoding="utf-8").splitlines()
    return en, de, test_en, test_de


@pytest.fixture(scope="module")
def vocab(multi30k):
    en, de, _, _ = multi30k
    return SharedVocab.train(en + de, vocab_size=2000)


def test_special_ids(vocab):
    assert (PAD, BOS, EOS, UNK) == (0, 1, 2, 3)
    assert [vocab.tokenizer.id_to_token(i) for i in range(4)] == ["<pad>", "<s>", "</s>", "<unk>"]
    assert len(vocab) == 2000


def test_round_trip_on_held_out_multi30k(vocab, multi30k):
    _, _, test_en, test_de = multi30k
    for line in test_en[:300] + test_de[:300]:
        ids = vocab.encode(line)
        assert UNK not in ids and min(ids) > UNK
        assert vocab.decode(ids) == line
    for odd in ["  two  spaces ", "Straße «Ölfeld» — 3½ €", "日本語", ""]:
        assert vocab.decode(vocab.encode(odd)) == odd


def test_vocabulary_is_shared_and_compresses_both_languages(vocab, multi30k):
    _, _, test_en, test_de = multi30k
    for lines in (test_en[:200], test_de[:200]):
        words = sum(len(line.split()) for line in lines)
        pieces = sum(len(vocab.encode(line)) for line in lines)
        assert pieces < 2.0 * words  # a byte-level model without merges would need ~6 per word
    assert len(vocab.encode("Männer")) <= 2 and len(vocab.encode("people")) <= 2  # one table, both languages


def test_decode_stops_at_eos_and_skips_bos_pad(vocab):
    ids = vocab.encode("A dog runs.")
    assert vocab.decode([BOS, *ids, EOS, *vocab.encode("junk"), PAD]) == "A dog runs."
    assert vocab.encode_batch(["A dog runs.", ""]) == [ids, []]


def test_save_load_identical(vocab, tmp_path, multi30k):
    path = tmp_path / "run" / "vocab.json"
    vocab.save(path)
    loaded = SharedVocab.load(path)
    line = multi30k[3][0]
    assert loaded.encode(line) == vocab.encode(line) and loaded.decode(loaded.encode(line)) == line
    assert not list(path.parent.glob("*.tmp"))


def test_load_errors_name_the_file(tmp_path):
    with pytest.raises(DataError, match="vocab.json: vocabulary file not found"):
        SharedVocab.load(tmp_path / "vocab.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(DataError, match="bad.json: not a tokenizer JSON"):
        SharedVocab.load(bad)
    with pytest.raises(DataError, match="too small"):
        SharedVocab.train(["a b"], vocab_size=100)


def test_words_split_keeps_tree_symbols_whole_and_round_trips_tokenized_text(data_dir):
    """``split="words"`` (Section 6.3's trees): BPE never cuts ``(NP`` into ``(`` + ``NP`` as the byte-level split does."""
    from repro.parsing.linearize import linearize
    from repro.parsing.trees import preprocess, read_trees

    files = sorted((data_dir / "ptb-nltk-sample/combined").glob("wsj_00[0-4]*.mrg"))
    trees = [t for f in files for t in (preprocess(item.tree) for item in read_trees(f)) if t is not None]
    sentences = [" ".join(t.leaves()) for t in trees]
    targets = [linearize(t) for t in trees]
    words = SharedVocab.train(sentences + targets, vocab_size=1000, split="words")
    byte_level = SharedVocab.train(sentences + targets, vocab_size=1000)
    assert words.tokens("(S (NP XX )NP (VP XX (PP XX )PP )VP )S") == [
        "Ġ(S", "Ġ(NP", "ĠXX", "Ġ)NP", "Ġ(VP", "ĠXX", "Ġ(PP", "ĠXX", "Ġ)PP", "Ġ)VP", "Ġ)S"]
    symbols = sum(len(t.split()) for t in targets)
    assert sum(len(words.encode(t)) for t in targets) < 1.02 * symbols  # only rare labels are ever cut
    for target in targets[:50]:
        assert words.decode(words.encode(target)) == target
    assert byte_level.tokens("(NP XX )NP")[:2] == ["Ġ(", "NP"]  # what the words split avoids
    for sentence in sentences[:50]:
        assert words.decode(words.encode(sentence)) == sentence
    assert words.decode(words.encode("日本語  two")) == "日本語 two"  # any byte; whitespace runs become one space
    with pytest.raises(DataError, match="unknown BPE split 'chars'"):
        SharedVocab.train(["a b"], vocab_size=1000, split="chars")


def test_word_level_vocab_gives_one_token_per_word_and_classes_for_rare_words(data_dir, tmp_path):
    """``split="word-level"`` (Section 6.3's parser): a source of n words is n tokens, rare words are
    their unknown-word class, tree symbols stay whole and round-trip; saved and loaded alike."""
    from repro.data.signatures import signature
    from repro.parsing.linearize import linearize
    from repro.parsing.trees import preprocess, read_trees

    files = sorted((data_dir / "ptb-nltk-sample/combined").glob("wsj_00[0-4]*.mrg"))
    trees = [t for f in files for t in (preprocess(item.tree) for item in read_trees(f)) if t is not None]
    sentences = [" ".join(t.leaves()) for t in trees]
    targets = [linearize(t) for t in trees]
    vocab = SharedVocab.train(sentences + targets, vocab_size=3000, split="word-level")
    assert vocab.word_level and len(vocab) <= 3000
    for sentence, target in zip(sentences, targets):
        assert len(vocab.encode(sentence)) == len(sentence.split()) == target.split().count("XX")
        assert vocab.decode(vocab.encode(target)) == target
    assert vocab.tokens("the Zyxwvuting") == ["the", signature("Zyxwvuting")] == ["the", "UNK-INITC-ing"]
    assert vocab.decode(vocab.encode("the Zyxwvuting")) == "the UNK-INITC-ing"
    counts = {}
    for s in sentences:
        for w in s.split():
            counts[w] = counts.get(w, 0) + 1
    once = next(w for w, n in counts.items() if n == 1 and w.isalpha())
    assert vocab.tokens(once) == [signature(once)]  # seen once: its class, which training saw
    assert vocab.encode(once) != [UNK]
    vocab.save(tmp_path / "v.json")
    loaded = SharedVocab.load(tmp_path / "v.json")
    assert loaded.word_level and loaded.encode(sentences[0] + " Zyxwvuting") == vocab.encode(sentences[0] + " Zyxwvuting")
    small = SharedVocab.train(["a a b b c", "(S XX )S (S XX )S"], vocab_size=8, split="word-level")
    assert len(small) == 8  # 4 specials + the 4 most frequent entries


def test_per_word_tree_tokens_are_kept_whole_and_unseen_ones_back_off_keeping_the_leaf(data_dir):
    """Per-word targets (issue 18): every tree token of the training text is in the vocabulary
    however small ``vocab_size`` (the words give way), so training targets round-trip exactly; a
    token never seen in training is encoded as its nearest back-off (closers + ``XX``, else ``XX``),
    never as a word's class: one token and one leaf per word, only brackets lost."""
    from repro.parsing.linearize import LEAF, group_by_word, linearize, symbols
    from repro.parsing.trees import preprocess, read_trees

    files = sorted((data_dir / "ptb-nltk-sample/combined").glob("wsj_00[0-4]*.mrg"))
    trees = [t for f in files for t in (preprocess(item.tree) for item in read_trees(f)) if t is not None]
    sentences = [" ".join(t.leaves()) for t in trees]
    targets = [group_by_word(linearize(t)) for t in trees]
    seen, unseen = targets[:800], targets[800:]
    vocab = SharedVocab.train(sentences[:800] + seen, vocab_size=1000, split="word-level")
    assert all(vocab.decode(vocab.encode(t)) == t for t in seen)
    assert sum(1 for w in vocab.tokenizer.get_vocab() if w[0] not in "()<" and "UNK" not in w) > 0  # some words left
    backed_off = 0
    for target in unseen:
        ids = vocab.encode(target)
        decoded = vocab.decode(ids)
        assert UNK not in ids and not any(w.startswith("UNK") for w in decoded.split())
        assert len(ids) == len(target.split())  # one token per word
        assert symbols(decoded).count(LEAF) == symbols(target).count(LEAF)  # one leaf per word
        backed_off += sum(a != b for a, b in zip(decoded.split(), target.split()))
    assert backed_off > 0
    assert vocab.tokens(")NP_)VP_(SBAR_(S_(NP_(QP_(QP_XX") in ([")NP_)VP_XX"], [LEAF])
