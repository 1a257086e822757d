"""Section 6.1 decoding: cached equals recompute, beam 1 equals greedy, the beam finds the
GNMT-optimal hypothesis when it is wide enough, and the length limit holds."""

import itertools

import pytest
import torch

from repro.decode import beam_search, greedy_decode, length_penalty
from repro.decode.stepper import BOS, EOS
from repro.model import Transformer, TransformerConfig


class EosBiased(Transformer):
    """A random model with sharpened logits and a bias on EOS, so that hypotheses end at varied lengths."""

    eos_bias, sharpen, eos_gain = 0.0, 1.0, 0.0

    def project(self, hidden):
        logits = super().project(hidden) * self.sharpen
        logits[..., EOS] += self.eos_bias + self.eos_gain * hidden[..., 0]  # context-dependent ending
        return logits


def make_model(vocab=30, seed=0, eos_bias=0.5, n_layers=2, sharpen=1.0, eos_gain=0.0):
    torch.manual_seed(seed)
    cfg = TransformerConfig(src_vocab_size=vocab, tgt_vocab_size=vocab, n_layers=n_layers, d_model=32, d_ff=64,
                            n_heads=4, dropout=0.1)
    model = EosBiased(cfg)
    model.eos_bias, model.sharpen, model.eos_gain = eos_bias, sharpen, eos_gain
    return model.eval()


# (seed, eos_bias, sharpen): between them, beam and greedy outputs of every length from 0 to the limit
SETTINGS = [(0, 0.5, 1.0), (1, 0.0, 4.0), (0, 4.0, 4.0)]


def make_src(batch=6, length=7, vocab=30, seed=1):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, vocab, (batch, length), generator=g)
    for i in range(batch):
        src[i, length - i % length:] = 0 if i % length else src[i, length - i % length:]
    return src


def test_length_penalty_is_gnmt():
    assert length_penalty(1, 0.6) == 1.0
    assert length_penalty(7, 0.6) == pytest.approx(2.0**0.6)
    assert length_penalty(10, 0.0) == 1.0


def test_outputs_vary_in_length():  # guards the other tests against degenerate models
    beam, greedy = set(), set()
    for seed, bias, sharpen in SETTINGS:
        model, src = make_model(seed=seed, eos_bias=bias, sharpen=sharpen), make_src(seed=seed)
        beam |= {len(h) for h in beam_search(model, src, max_len_offset=10)}
        greedy |= {len(h) for h in greedy_decode(model, src, max_len_offset=10)}
    assert len(beam) >= 5 and len(greedy) >= 3 and 0 in greedy


@pytest.mark.parametrize("beam", [1, 4])
@pytest.mark.parametrize("seed, bias, sharpen", SETTINGS)
def test_cached_equals_recompute(beam, seed, bias, sharpen):
    model, src = make_model(seed=seed, eos_bias=bias, sharpen=sharpen), make_src(seed=seed)
    cached = beam_search(model, src, beam_size=beam, max_len_offset=10, return_hypotheses=True)
    full = beam_search(model, src, beam_size=beam, max_len_offset=10, use_cache=False, return_hypotheses=True)
    assert [h.tokens for h in cached] == [h.tokens for h in full]
    assert [h.score for h in cached] == pytest.approx([h.score for h in full], abs=1e-4)
    assert greedy_decode(model, src, max_len_offset=10) == greedy_decode(model, src, max_len_offset=10, use_cache=False)


def test_beam_one_equals_greedy():
    for seed, bias, sharpen in SETTINGS:
        model, src = make_model(seed=seed, eos_bias=bias, sharpen=sharpen), make_src(seed=seed)
        assert beam_search(model, src, beam_size=1, max_len_offset=10) == greedy_decode(model, src, max_len_offset=10)


def test_batched_equals_one_by_one():
    model, src = make_model(), make_src()
    batched = beam_search(model, src, max_len_offset=10)
    for i in range(src.size(0)):
        row = src[i : i + 1, : int((src[i] != 0).sum())]
        assert beam_search(model, row, max_len_offset=10) == [batched[i]]


def test_maximum_length_is_input_plus_offset():
    model = make_model(eos_bias=-50.0)  # EOS never wins: the limit must stop the search
    src = make_src()
    lengths = (src != 0).sum(1).tolist()
    for decode in (lambda: beam_search(model, src, max_len_offset=5), lambda: greedy_decode(model, src, max_len_offset=5)):
        assert [len(h) for h in decode()] == [n + 5 for n in lengths]


def _brute_force(model, src, max_tokens, alpha, count_eos=True):
    """Every hypothesis of up to ``max_tokens`` tokens, scored log P(Y, EOS | X) / lp(|Y|)."""
    vocab = model.cfg.tgt_vocab_size
    tokens = [t for t in range(vocab) if t not in (0, BOS, EOS)]
    best = None
    with torch.no_grad():
        for n in range(max_tokens + 1):
            seqs = torch.tensor(list(itertools.product(tokens, repeat=n)), dtype=torch.long).view(len(tokens) ** n, n)
            tgt_in = torch.cat([torch.full((seqs.size(0), 1), BOS), seqs], 1)
            logp = model(src.expand(seqs.size(0), -1), tgt_in).float().log_softmax(-1)
            total = logp[:, :n].gather(2, seqs[:, :, None]).sum((1, 2)) + logp[:, n, EOS]
            scores = total / length_penalty(n + 1 if count_eos else n, alpha)
            i = int(scores.argmax())
            if best is None or float(scores[i]) > best[0]:
                best = (float(scores[i]), seqs[i].tolist())
    return best


def test_wide_beam_finds_the_gnmt_optimum():
    """A beam as wide as the search space with the exact stopping rule must return the best
    hypothesis under log P / lp; a wrong penalty (|Y| without EOS, or none) picks another."""
    vocab, offset, alpha = 8, 2, 0.6   # 5 emittable tokens + EOS; up to 3 output tokens
    wrong_differs = 0
    for seed, bias, gain in [(0, 0.0, 3.0), (0, -2.0, 3.0), (2, -4.0, 6.0), (1, 0.0, 3.0)]:
        model = make_model(vocab=vocab, seed=seed, eos_bias=bias, n_layers=1, sharpen=3.0, eos_gain=gain)
        src = torch.tensor([[5]])
        best_score, best_seq = _brute_force(model, src, 1 + offset, alpha)
        hyp = beam_search(model, src, beam_size=125, alpha=alpha, max_len_offset=offset, stop="bound",
                          return_hypotheses=True)[0]
        assert hyp.tokens == best_seq and hyp.score == pytest.approx(best_score, abs=1e-4)
        wrong = [_brute_force(model, src, 1 + offset, alpha, count_eos=False)[1],
                 _brute_force(model, src, 1 + offset, 0.0)[1]]
        wrong_differs += sum(w != best_seq for w in wrong)
    assert wrong_differs >= 2


def test_early_stopping_never_scores_above_the_exact_search():
    model, src = make_model(), make_src()
    early = beam_search(model, src, max_len_offset=10, return_hypotheses=True)
    exact = beam_search(model, src, max_len_offset=10, stop="bound", return_hypotheses=True)
    assert all(e.score <= x.score + 1e-5 for e, x in zip(early, exact))


@pytest.mark.parametrize("beam", [1, 4])
@pytest.mark.parametrize("seed, bias, sharpen", SETTINGS)
def test_cached_equals_recompute_in_bf16(beam, seed, bias, sharpen):
    """Under bf16 autocast the cache holds bf16 keys and values; the search still finds what full
    recompute finds, and the beam's scores are fp32 sums of fp32 log-probabilities."""
    model, src = make_model(seed=seed, eos_bias=bias, sharpen=sharpen), make_src(seed=seed)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        cached = beam_search(model, src, beam_size=beam, max_len_offset=10, return_hypotheses=True)
        full = beam_search(model, src, beam_size=beam, max_len_offset=10, use_cache=False, return_hypotheses=True)
        greedy = greedy_decode(model, src, max_len_offset=10), greedy_decode(model, src, max_len_offset=10,
                                                                             use_cache=False)
    assert [h.tokens for h in cached] == [h.tokens for h in full]
    assert [h.score for h in cached] == pytest.approx([h.score for h in full], abs=0.05)
    assert all(isinstance(h.score, float) for h in cached)
    assert greedy[0] == greedy[1]
