"""The shared source-target subword vocabulary of Section 5.1.

"Sentences were encoded using byte-pair encoding [3], which has a shared source-target
vocabulary of about 37000 tokens" (EN-DE; 32000 word-pieces for EN-FR). One BPE model is
trained on source and target text together, as Section 3.4's shared embedding matrix requires.

Built on Hugging Face ``tokenizers`` with a byte-level pre-tokenizer: every byte is in the base
alphabet, so no text maps to UNK, and ``decode(encode(s)) == s`` for any string (spacing and
punctuation are restored exactly, which detokenized BLEU needs).

``split="words"`` is for text that is already tokenized and whose whitespace carries no
information, such as Section 6.3's parse trees: BPE then works inside whitespace-delimited
words only, so a frequent symbol like ``(NP`` or ``)VP`` becomes one token instead of the
``(`` + ``NP`` the byte-level splitter makes of it. The cost is exactness of spacing: runs of
whitespace decode as one space.

``split="word-level"`` learns no merges at all: one token per whitespace word. Every tree token
of the training text is kept, however rare (symbols such as ``(NP``, or per-word tokens such as
``)NP_(VP_XX``); the words that occur at least ``min_frequency`` times fill the rest of
``vocab_size``, most frequent first (the tree tokens may take it all). Every other word is
encoded as its unknown-word class (:mod:`repro.data.signatures`), a per-word tree token never
seen in training as its nearest back-off that keeps the leaf (:mod:`repro.data.tree_tokens`:
brackets are lost, the word's one token is not), and ``<unk>`` is left only for a word whose
class is unseen too. For Section 6.3's parser at small scale: the source then has exactly one
token per leaf of the linearised tree.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from repro.files import strict_json
from repro.files.reader import read_text
from repro.limits import RECORD_BYTES
from repro.data.signatures import PREFIX, signature
from repro.data.tree_tokens import LEAF, always_whole, tree_backoffs
from repro.errors import DataError
from repro.files.writer import atomic_write_text

PAD, BOS, EOS, UNK = 0, 1, 2, 3
SPECIAL_TOKENS = ("<pad>", "<s>", "</s>", "<unk>")  # in id order: PAD=0, BOS=1, EOS=2, UNK=3
#: How text is cut into words before BPE: "bytes" (GPT-2's byte-level regex, exact round trip)
#: or "words" (whitespace only; for pre-tokenized text); "word-level": no BPE, whole words and
#: unknown-word classes.
SPLITS = ("bytes", "words", "word-level")
WORD_LEVEL = "word-level"


class SharedVocab:
    """A joint BPE vocabulary; ``encode`` gives ids without BOS/EOS, ``decode`` stops at the first EOS."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        for expected, token in enumerate(SPECIAL_TOKENS):
            if tokenizer.token_to_id(token) != expected:
                raise DataError(f"tokenizer has {token!r} at id {tokenizer.token_to_id(token)}, expected {expected}")
        self.tokenizer = tokenizer
        self.word_level = isinstance(tokenizer.model, models.WordLevel)
        self._known = set(tokenizer.get_vocab()) if self.word_level else set()

    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int, *, min_frequency: int = 2,
              split: str = "bytes") -> "SharedVocab":
        """Learn BPE merges on ``texts`` (give it source and target sentences together).

        ``split`` is one of :data:`SPLITS` (see the module docstring).
        """
        if split == WORD_LEVEL:
            return cls._train_words(texts, vocab_size, min_frequency)
        if vocab_size < len(SPECIAL_TOKENS) + 256:
            raise DataError(f"vocab_size {vocab_size} is too small: the byte alphabet alone needs 260 entries")
        if split not in SPLITS:
            raise DataError(f"unknown BPE split {split!r}; expected one of {', '.join(SPLITS)}")
        tok = Tokenizer(models.BPE(unk_token="<unk>"))
        # The space that starts each word is part of its tokens; encode() prepends one so that the
        # first word looks like the others, and decode() removes exactly that one.
        if split == "bytes":
            tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        else:
            tok.pre_tokenizer = pre_tokenizers.Sequence([
                pre_tokenizers.WhitespaceSplit(),
                pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=False),
            ])
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            special_tokens=list(SPECIAL_TOKENS),
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
        tok.train_from_iterator((" " + t for t in texts), trainer=trainer)
        return cls(tok)

    @classmethod
    def _train_words(cls, texts: Iterable[str], vocab_size: int, min_frequency: int) -> "SharedVocab":
        """A word-level vocabulary: frequent words whole, rare ones counted as their class."""
        counts: Counter[str] = Counter()
        for text in texts:
            counts.update(text.split())
        entries: Counter[str] = Counter()
        for word, n in counts.items():
            if word.startswith(PREFIX):
                raise DataError(f"word-level vocabulary: the text holds {word!r}, which looks like an unknown-word class")
            entries[word if n >= min_frequency or always_whole(word) else signature(word)] += n
        size = vocab_size - len(SPECIAL_TOKENS)
        if size < 1:
            raise DataError(f"vocab_size {vocab_size} is too small for a word-level vocabulary")
        # every tree token of the training text stays, however rare (a tree must stay decodable, a
        # training target whole); the words fill the rest, most frequent first
        kept = {token for token in entries if token == LEAF or always_whole(token)}
        rest = sorted((t for t in entries if t not in kept), key=lambda t: (-entries[t], t))
        kept.update(rest[:max(size - len(kept), 0)])
        ranked = sorted(((t, entries[t]) for t in kept), key=lambda item: (-item[1], item[0]))
        table = {token: i for i, token in enumerate(SPECIAL_TOKENS)}
        table.update({word: len(SPECIAL_TOKENS) + i for i, (word, _) in enumerate(ranked)})
        tok = Tokenizer(models.WordLevel(vocab=table, unk_token="<unk>"))
        tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
        return cls(tok)

    def _words(self, text: str) -> str:
        """``text`` with each word outside a word-level vocabulary replaced by its class."""
        return " ".join(w if w in self._known else self._stand_in(w) for w in text.split())

    def _stand_in(self, word: str) -> str:
        """What an unknown word is encoded as: a per-word tree token never seen in training as its
        nearest back-off in the vocabulary (one token, one leaf), any other word as its class
        (:mod:`repro.data.signatures`)."""
        return next((b for b in tree_backoffs(word) if b in self._known), None) or signature(word)

    def encode(self, text: str) -> list[int]:
        if not text:
            return []
        if self.word_level:
            return self.tokenizer.encode(self._words(text), add_special_tokens=False).ids
        return self.tokenizer.encode(" " + text, add_special_tokens=False).ids

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        if self.word_level:
            return [self.encode(t) for t in texts]
        encoded = self.tokenizer.encode_batch([" " + t for t in texts], add_special_tokens=False)
        return [e.ids if t else [] for e, t in zip(encoded, texts)]

    def decode(self, ids: Iterable[int]) -> str:
        """Text of ``ids``: BOS/PAD are skipped, everything from the first EOS on is dropped."""
        kept: list[int] = []
        for i in ids:
            i = int(i)
            if i == EOS:
                break
            if i not in (PAD, BOS):
                kept.append(i)
        if self.word_level:
            return " ".join(self.tokenizer.id_to_token(i) or SPECIAL_TOKENS[UNK] for i in kept)
        text = self.tokenizer.decode(kept, skip_special_tokens=False)
        return text[1:] if text.startswith(" ") else text  # the space encode() prepended

    def tokens(self, text: str) -> list[str]:
        if self.word_level:
            return self.tokenizer.encode(self._words(text), add_special_tokens=False).tokens
        return self.tokenizer.encode(" " + text, add_special_tokens=False).tokens

    def __len__(self) -> int:
        return self.tokenizer.get_vocab_size(with_added_tokens=True)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the whole tokenizer (merges, vocabulary, pre-tokenizer) as one JSON file, atomically."""
        atomic_write_text(Path(path), self.tokenizer.to_str(pretty=True))

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "SharedVocab":
        path = Path(path)
        text = read_text(path, "vocabulary file", limit=RECORD_BYTES.hard, error=DataError)
        try:
            strict_json.loads(text, str(path), error=DataError)  # a key given twice is refused, not overwritten
        except DataError as err:
            raise DataError(f"{path}: not a tokenizer JSON file ({str(err).removeprefix(str(path))})") from None
        try:
            tok = Tokenizer.from_str(text)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as err:  # tokenizers raises its own Exception type, or a Rust panic, on bad JSON
            raise DataError(f"{path}: not a tokenizer JSON file ({str(err)[:300]})") from None
        try:
            return cls(tok)
        except DataError as err:
            raise DataError(f"{path}: {err}") from None
