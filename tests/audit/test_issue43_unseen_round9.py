"""Issue 43, the ninth round of unseen families (:mod:`tests.audit.handwritten.round9`): ReZero's
zero-initialised residual gates without norms, heads looped with einsum and masked after the
softmax, a sliding-window (LED) self-attention and fairseq's NormFormer. Each wrong verdict the
audit gave them, reproduced on the family itself, with cases beside them that must still fail;
and the verdicts of EXPECTED.md that distinguish the families, kept."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tests.audit.handwritten.round7 import conv_ffn
from tests.audit.handwritten.round9 import loop_heads, normformer, rezero, sliding_window
from tests.audit.test_issue43_unseen_round7 import FAIL, PASS, dimensions, verdict


# -- a layer without norms: the norm claims fail as absent ------------------------------------------

@pytest.mark.parametrize("claim_id", ["sec3.sublayer.post-norm", "sec3.sublayer.post-norm-decoder",
                                      "sec3.sublayer.layer-norm"])
def test_a_layer_without_norms_fails_as_absent(claim_id: str) -> None:
    # norms=() erred: "encoder_layer returned 0 norms, expected 2", "not enough values to unpack"
    record = verdict(claim_id, rezero.adapter())
    assert record.status == FAIL and "absent" in record.why and "no layer normalisation" in record.why, record.why


# -- zero-initialised gates: the architecture's dependencies, not the closed gates' ----------------

class Variant(rezero.ReZeroAdapter):
    """ReZero, the net changed after it is built by ``change``; the same net at every call (so that
    the gates can be seen restored)."""

    def __init__(self, change=lambda net: None) -> None:
        self.change, self.nets = change, []

    def model(self, vocab_size, d_model, n_heads, d_ff, n_layers):
        with torch.random.fork_rng():
            torch.manual_seed(0)
            net = rezero.ReZeroTransformer(vocab_size, d_model, n_heads, d_ff, n_layers, 0.0).eval()
        self.change(net)
        self.nets.append(net)
        return self._parts(net, vocab_size, d_model)


def leaky(net) -> None:
    for layer in net.decoder:
        layer.self_attention = lambda tgt, layer=layer: layer.self_attn(tgt, tgt, tgt, need_weights=False)[0]


def padding_blind(net) -> None:
    for layer in net.encoder:
        layer.forward = lambda src, src_key_padding_mask=None, layer=layer: type(layer).forward(layer, src)


def shared(net) -> None:
    net.encoder = nn.ModuleList([net.encoder[0]] * len(net.encoder))
    net.decoder = nn.ModuleList([net.decoder[0]] * len(net.decoder))


@pytest.mark.parametrize("claim_id", ["sec3.decoder.causal-mask", "sec3.decoder.encoder-decoder-attention",
                                      "sec3.layers.distinct-parameters", "sec3.encoder.all-positions"])
def test_zero_gates_do_not_read_as_blind_layers(claim_id: str) -> None:
    # every layer is the identity at initialisation: 72 blind pairs, a decoder blind to the memory,
    # 6 pairs of identical layers, 2724 blind encoder pairs (all failed)
    record = verdict(claim_id, rezero.adapter())
    assert record.status == PASS and "all-zero parameter tensors" in record.why, record.why


@pytest.mark.parametrize("claim_id,change", [("sec3.decoder.causal-mask", leaky),
                                             ("impl.padding-invariance", padding_blind),
                                             ("sec3.layers.distinct-parameters", shared)])
def test_a_departure_behind_zero_gates_still_fails(claim_id: str, change) -> None:
    # the padding-blind encoder passed: nothing it computed reached the logits
    record = verdict(claim_id, Variant(change))
    assert record.status == FAIL, record.why


def test_the_gates_are_closed_again_after_the_check() -> None:
    target = Variant()
    assert verdict("sec3.layers.distinct-parameters", target).status == PASS
    assert target.nets and all(not layer.resweight.any() for net in target.nets for layer in [*net.encoder, *net.decoder])


# -- a sliding window: beyond its window, and in view of the FLOP counter and the census -----------

def test_a_sliding_window_does_not_keep_positions() -> None:
    # the probes were 7 and 9 positions long, inside the window: it passed
    record = verdict("sec3.multihead.positions-kept", sliding_window.adapter())
    assert record.status == FAIL and "n=640" in record.why, record.why


def test_the_cost_of_a_sliding_window_is_counted() -> None:
    # "the FLOP counter saw no term quadratic in n ... a kernel it cannot count" (an error)
    record = verdict("sec3.multihead.cost", sliding_window.adapter())
    assert record.status == PASS and "windowed attention, linear in n" in record.why, record.why


@pytest.mark.parametrize("family", [sliding_window, loop_heads])
def test_heads_are_read_off_windows_and_python_loops(family) -> None:
    # sliding_window: "no self-attention over as many queries and keys ..." (inconclusive);
    # loop_heads: each einsum head read as an attention of its own (h=1)
    measured, seen = dimensions(family.adapter(), d_model=128, heads=4, d_ff=256)
    assert (measured["h"], measured["d_k"], measured["d_v"], measured["N_encoder"]) == (4, 32, 32, 2), seen


# -- the verdicts that tell the families apart (EXPECTED.md) ----------------------------------------

FAMILIES = {"rezero": rezero, "loop_heads": loop_heads, "sliding_window": sliding_window, "normformer": normformer,
            "conv_ffn": conv_ffn}
KEPT = {
    "sec3.decoder.causal-mask": {"loop_heads": FAIL},
    "impl.padding-invariance": {"loop_heads": FAIL, "rezero": PASS},
    "sec3.eq1.scaled-dot-product": {"loop_heads": FAIL, "sliding_window": FAIL, "normformer": PASS},
    "sec3.encoder.all-positions": {"sliding_window": FAIL},
    "sec3.multihead.positions-kept": {"normformer": PASS, "conv_ffn": PASS},
    "sec3.sublayer.post-norm": {"normformer": FAIL, "loop_heads": PASS},
    "sec3.eq2.feed-forward": {"normformer": FAIL},
    "sec3.embedding.scale": {"normformer": FAIL},
    "sec3.pe.both-stacks": {"normformer": FAIL},
    "sec5.eq3.schedule": {"normformer": PASS},
}


@pytest.mark.parametrize("claim_id,name", [(c, f) for c, fams in KEPT.items() for f in fams])
def test_expected_verdicts_kept(claim_id: str, name: str) -> None:
    record = verdict(claim_id, FAMILIES[name].adapter())
    assert record.status == KEPT[claim_id][name], record.why
