"""Table 3's PPL: exp of the mean per-wordpiece negative log-likelihood, no smoothing, PAD ignored."""

import math

import torch
import torch.nn.functional as F

from repro.data.batching import collate
from repro.eval.perplexity import perplexity
from repro.model import Transformer, TransformerConfig


def test_perplexity_is_exp_of_mean_token_nll():
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(src_vocab_size=20, tgt_vocab_size=20, n_layers=1, d_model=16, d_ff=32,
                                          n_heads=2))
    examples = [([5, 6, 7], [8, 9]), ([4, 4], [10, 11, 12, 13]), ([7], [5])]
    result = perplexity(model, examples, max_tokens=8)  # several batches
    batch = collate(examples)
    model.eval()
    with torch.no_grad():
        logits = model(batch.src, batch.tgt_in)
    nll = F.cross_entropy(logits.view(-1, 20), batch.tgt_out.view(-1), ignore_index=0, reduction="sum")
    assert result.tokens == 2 + 4 + 1 + 3  # every wordpiece and each EOS
    assert math.isclose(result.ppl, math.exp(nll.item() / result.tokens), rel_tol=1e-5)
    # a per-sentence mean (a plausible mistake) gives another number
    per_sentence = F.cross_entropy(logits.transpose(1, 2), batch.tgt_out, ignore_index=0, reduction="none").sum(1)
    assert not math.isclose(result.ppl, math.exp(per_sentence.mean().item()), rel_tol=1e-3)


def test_per_sentence_nll_is_each_sentences_own_and_sums_to_the_total():
    """``per_sentence``: each sentence's NLL and count, recomputed here one sentence at a time with
    full logits, and their sums the corpus's (the bootstrap over sentences resamples these)."""
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(src_vocab_size=20, tgt_vocab_size=20, n_layers=1, d_model=16, d_ff=32,
                                          n_heads=2))
    examples = [([5, 6, 7], [8, 9]), ([4, 4], [10, 11, 12, 13]), ([7], [5]), ([3, 9, 9, 9], [6])]
    result = perplexity(model, examples, max_tokens=8, per_sentence=True)
    model.eval()
    expected = []
    for example in examples:
        batch = collate([example])
        with torch.no_grad():
            logits = model(batch.src, batch.tgt_in)
        nll = F.cross_entropy(logits.view(-1, 20), batch.tgt_out.view(-1), ignore_index=0, reduction="sum")
        expected.append((nll.item(), len(example[1]) + 1))
    got = sorted(result.sentences, key=lambda s: s[1])
    want = sorted(expected, key=lambda s: s[1])
    assert [t for _, t in got] == [t for _, t in want]
    assert all(math.isclose(g, w, rel_tol=1e-5) for (g, _), (w, _) in zip(got, want))
    assert math.isclose(sum(n for n, _ in result.sentences), result.nll, rel_tol=1e-6)
    assert perplexity(model, examples, max_tokens=8).sentences is None


def test_token_accuracy_is_the_share_of_targets_the_model_ranks_first():
    """Section 5.4's "improves accuracy" (issue 44): the same pass as the perplexity counts the targets,
    EOS included and PAD not, that are the argmax of their logits."""
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(src_vocab_size=20, tgt_vocab_size=20, n_layers=1, d_model=16, d_ff=32,
                                          n_heads=2))
    examples = [([5, 6, 7], [8, 9]), ([4, 4], [10, 11, 12, 13]), ([7], [5])]
    result = perplexity(model, examples, max_tokens=8)
    batch = collate(examples)
    model.eval()
    with torch.no_grad():
        logits = model(batch.src, batch.tgt_in)
    real = batch.tgt_out != 0
    correct = int(((logits.argmax(-1) == batch.tgt_out) & real).sum())
    assert result.correct == correct and math.isclose(result.accuracy, correct / int(real.sum()))
    with torch.no_grad():   # every logit equal: the argmax is token 0 (PAD), never a target
        model.output_projection.weight.zero_()
    assert perplexity(model, examples, max_tokens=8).accuracy == 0
