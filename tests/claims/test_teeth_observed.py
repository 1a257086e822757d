"""Teeth of the claims that watch what runs (issue 28): each fails on a plausible wrong version of
the code or of a job's settings, and passes on repro's own (test_teeth_run holds the control for
the older claims; the new ones are controlled here).

A wrong job setting is put into the job spec ``repro submit`` plans (the checkers must find it by
running the code: none of them reads the setting); a wrong line of code is patched for the
length of a check, as a one-line mistake in the source would be.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from unittest import mock

import pytest
import torch

import repro.checks.evaluation_average as evaluation_average
import repro.checks.jobs as jobs
import repro.checks.recipe_runs as recipe_runs
import repro.checks.search_probe as search_probe
import repro.checks.training as training
import repro.cluster.paper_jobs as paper_jobs
import repro.decode.beam as beam
import repro.decode.stepper as step
import repro.eval.bleu as bleu
import repro.model.attention as attention
import repro.model.layers as layers
import repro.model.transformer as transformer
import repro.train.loop as loop
from repro.audit.repro_adapter import ReproAdapter
from repro.checks import CHECKERS, select_claims
from repro.checks.attention import reference_attention
from repro.claims import Outcome
from repro.claims.runner import run_claim

CLAIMS = {c.id: c for c in select_claims()}


def outcome(claim_id: str, adapter=None) -> Outcome:
    claim = CLAIMS[claim_id]
    return run_claim(claim, CHECKERS[claim.checker], adapter or ReproAdapter(), {}).status


@contextlib.contextmanager
def job_changed(name: str, *, train: dict | None = None, model: dict | None = None,
                decode: dict | None = None) -> Iterator[None]:
    """The job ``name`` as ``repro submit`` would plan it with these settings changed."""
    original = paper_jobs.job_spec.__wrapped__

    def changed(experiment, job=None, profile=None):
        spec = original(experiment, job, profile)
        if spec.name != name:
            return spec
        new_train = {**spec.train, **(train or {})}
        if model:
            new_train["model_overrides"] = {**(spec.train.get("model_overrides") or {}), **model}
        return dataclasses.replace(spec, train=new_train, decode={**spec.decode, **(decode or {})})

    with contextlib.ExitStack() as stack:
        for module in (paper_jobs, jobs, recipe_runs, search_probe, evaluation_average):
            if hasattr(module, "job_spec"):
                stack.enter_context(mock.patch.object(module, "job_spec", changed))
        stack.enter_context(mock.patch.dict(training._APPLIED, clear=True))
        yield


@contextlib.contextmanager
def patched(target, name: str, value) -> Iterator[None]:
    with mock.patch.object(target, name, value), mock.patch.dict(training._APPLIED, clear=True):
        yield


def rate_one_update_late():
    """The loop applies Eq. 3 one update late (update k at the rate of k - 1)."""
    original = loop.launch_update
    return patched(loop, "launch_update", lambda *a, **k: original(*a, **{**k, "step": max(k["step"] - 1, 1)}))


def weight_decay():
    """Adam with (decoupled) weight decay, as AdamW's default would add."""
    import repro.train.loop as train_loop

    def adamw(cfg, model):
        params = list(dict.fromkeys(p for p in model.parameters() if p.requires_grad))
        return torch.optim.AdamW(params, lr=0.0, betas=(cfg.adam_beta1, cfg.adam_beta2), eps=cfg.adam_eps)

    return patched(train_loop, "optimizer_for", adamw)


def amsgrad():
    import repro.train.loop as train_loop

    def ams(cfg, model):
        params = list(dict.fromkeys(p for p in model.parameters() if p.requires_grad))
        return torch.optim.Adam(params, lr=0.0, betas=(cfg.adam_beta1, cfg.adam_beta2), eps=cfg.adam_eps, amsgrad=True)

    return patched(train_loop, "optimizer_for", ams)


def self_only_mask():
    """The decoder attends to its own position only: no leak, but no earlier position reaches it."""
    return patched(transformer, "causal_mask",
                   lambda length, device=None: torch.eye(length, dtype=torch.bool, device=device)[None, None])


def window_mask():
    """The decoder attends to the last two positions only (a local window)."""
    return patched(transformer, "causal_mask", lambda length, device=None: (
        torch.ones(length, length, dtype=torch.bool, device=device).tril() &
        ~torch.ones(length, length, dtype=torch.bool, device=device).tril(-2))[None, None])


def cache_trimmed():
    """The key/value cache keeps its first rows instead of the surviving hypotheses' rows."""
    def trim(self, index):
        if self.key is not None:
            self.key, self.value = self.key[: len(index)], self.value[: len(index)]
    return patched(attention.KeyValueCache, "reorder", trim)


def search_keeps_cache_order():
    """The search selects the surviving hypotheses but does not reorder its cache to them."""
    def select(self, index):
        self.memory = self.memory.index_select(0, index)
        self.src_mask = self.src_mask.index_select(0, index)
        if self.cache is not None:
            self.cache.reorder(index.sort().values)
    return patched(step.Stepper, "select", select)


def batch_limit():
    """Every sentence's output limit taken from the longest in its batch."""
    original = beam.source_lengths
    return patched(beam, "source_lengths", lambda src, pad: original(src, pad).max().expand(src.size(0)))


def affine_free_norm():
    original = torch.nn.LayerNorm
    return patched(layers.nn, "LayerNorm", lambda d, **k: original(d, elementwise_affine=False))


def no_brevity_penalty():
    original = bleu.multi_bleu

    def without(hyps, refs):
        score, precisions, bp = original(hyps, refs)
        return (score / bp if bp else score), precisions, 1.0

    return patched(bleu, "multi_bleu", without)


def no_escaping():
    return patched(bleu, "moses_tokenize", lambda line, lang="de", **k: bleu._moses(lang).tokenize(
        line, return_str=True, escape=False, aggressive_dash_splits=False))


def prune_to(keep: int):
    original = loop.prune_checkpoints
    return patched(loop, "prune_checkpoints", lambda out_dir, k: original(out_dir, min(k, keep)))


def average_first_k():
    import repro.train.average as average

    original = average.list_checkpoints
    return patched(average, "list_checkpoints", lambda d: list(reversed(original(d))))


def loss_per_pass():
    """Each pass's loss normalised by its own target tokens, not by the update's."""
    original = recipe_runs.accumulate

    def per_pass(objective, micro, *args, **kwargs):
        out = None
        for batch in micro:
            out = original(objective, [batch], *args, **kwargs)
        return out

    return patched(recipe_runs, "accumulate", per_pass)


class Unscaled(ReproAdapter):
    """Attention without the 1/sqrt(d_k) scale."""

    def attention(self, q, k, v, mask):
        return reference_attention(q * q.shape[-1] ** 0.5, k, v, mask).float()


WRONG = [
    ("sec5.adam", lambda: job_changed("table2-base-ende", train={"adam_beta2": 0.999})),
    ("sec5.adam", lambda: job_changed("table2-base-ende", train={"adam_eps": 1e-8})),
    ("sec5.adam", weight_decay),
    ("sec5.adam", amsgrad),
    ("sec5.eq3.loop", rate_one_update_late),
    ("sec5.eq3.loop", lambda: job_changed("table2-base-ende", train={"warmup_steps": 8000})),
    ("sec5.eq3.peak-step", lambda: job_changed("table2-base-ende", train={"warmup_steps": 4001})),
    ("sec5.eq3.peak-value", lambda: job_changed("table2-base-ende", train={"lr_scale": 2.0})),
    ("sec3.decoder.causal-mask", self_only_mask),
    ("sec3.decoder.causal-mask", window_mask),
    ("impl.incremental-decoding", cache_trimmed),
    ("sec6.length-penalty.observed", lambda: job_changed("table2-base-ende", decode={"alpha": 0.7})),
    ("sec6.length-penalty.observed", lambda: patched(beam, "length_penalty", lambda n, a: n**a)),
    ("sec6.length-penalty.observed", search_keeps_cache_order),
    ("sec6.beam-size.observed", lambda: job_changed("table2-base-ende", decode={"beam_size": 3})),
    ("sec6.max-output-length.observed", lambda: job_changed("table2-base-ende", decode={"max_len_offset": 49})),
    ("sec6.max-output-length.observed", batch_limit),
    ("sec6.3.parser.beam-size.observed", lambda: job_changed("table4-wsj", decode={"beam_size": 20})),
    ("sec6.3.parser.length-penalty.observed", lambda: job_changed("table4-wsj", decode={"alpha": 0.6})),
    ("sec6.average.observed-base", lambda: job_changed("table2-base-ende", train={"average_last": 4})),
    ("sec6.average.observed-base", average_first_k),
    ("sec6.average.observed-big", lambda: prune_to(10)),
    ("sec6.table3.no-averaging.observed", lambda: job_changed("table3-base", train={"average_last": 5})),
    ("sec3.base.dimensions", lambda: job_changed("table2-base-ende", model={"d_ff": 1024})),
    ("table3.dimensions.B-dk16", lambda: job_changed("table3-B-dk16", model={"d_k": 32})),
    ("sec6.3.parser.dimensions", lambda: job_changed("table4-wsj", model={"n_layers": 6})),
    ("table3.smoothing.D-ls0.2", lambda: job_changed("table3-D-ls0.2", train={"label_smoothing": 0.1})),
    ("table3.dropout.D-drop0.2", lambda: job_changed("table3-D-drop0.2", model={"dropout": 0.1})),
    ("table3.positions.E-learned", lambda: job_changed("table3-E-learned", model={"positional": "sinusoidal"})),
    ("table3.steps.big", lambda: job_changed("table3-big", train={"max_steps": 100_000})),
    ("sec5.train-steps.base.observed", lambda: job_changed("table2-base-ende", train={"max_steps": 99_999})),
    ("sec6.3.parser.unchanged", lambda: job_changed("table4-wsj", train={"label_smoothing": 0.2})),
    ("sec3.sublayer.layer-norm", affine_free_norm),
    ("table2.bleu.protocol", no_brevity_penalty),
    ("table2.bleu.protocol", no_escaping),
    ("sec3.pe.extrapolation", lambda: job_changed("table2-base-ende", model={"positional": "learned"})),
    ("sec5.batch.update-gradient", loss_per_pass),
]

ADAPTERS = [
    ("sec3.2.1.softmax-saturation", Unscaled()),
]


@pytest.mark.parametrize("claim_id, wrong", WRONG, ids=[f"{c}-{i}" for i, (c, _) in enumerate(WRONG)])
def test_claim_fails_on_wrong_code_or_a_wrong_job(claim_id, wrong):
    with wrong():
        assert outcome(claim_id) == Outcome.FAIL


@pytest.mark.parametrize("claim_id, adapter", ADAPTERS, ids=[c for c, _ in ADAPTERS])
def test_claim_fails_on_a_wrong_implementation(claim_id, adapter):
    assert outcome(claim_id, adapter) == Outcome.FAIL


NEW = sorted({c for c, _ in WRONG + ADAPTERS} | {
    "sec3.2.1.additive.space", "sec3.2.1.additive.speed", "sec4.n-below-d", "sec3.footnote4.dot-product-variance",
    "table3.positions.base", "table3.smoothing.D-ls0.0", "table3.dropout.D-drop0.0", "table3.steps.base",
    "sec5.train-steps.big.observed", "sec6.3.parser.ranking", "sec6.3.parser.max-output-length.observed",
    "table2.dimensions.big-ende", "table2.dimensions.big-enfr"})


@pytest.mark.parametrize("claim_id", NEW)
def test_claim_passes_on_repro(claim_id):
    assert outcome(claim_id) == Outcome.PASS


def test_a_step_time_is_compared_only_normalised_to_8_p100():
    import datetime as dt

    from repro.results.provenance import Provenance
    from repro.results.store import Result

    claim = CLAIMS["sec5.step-time.base"]

    def stored(seconds, hardware, scale="cluster: paper-p100", **extra):
        prov = Provenance(commit="0" * 40, config_hash="x", hardware=hardware, dataset="wmt14", scale=scale,
                          date=dt.datetime.now(dt.timezone.utc).isoformat(), extra=extra)
        return {claim.id: Result(claim.id, seconds, prov, unit="s")}

    def record(results):
        return run_claim(claim, CHECKERS[claim.checker], ReproAdapter(), results)

    # 0.4 s on 8 P100: as measured
    assert record(stored(0.4, "8 x NVIDIA Tesla P100", devices=8)).status == Outcome.PASS
    # 0.1 s on one device of 38 TFLOPS: 0.1 x 38 / (8 x 9.5) = 0.05 s on 8 P100, not the 0.4 it looks like
    fast = record(stored(0.1, "1 x NVIDIA H100", devices=1, peak_flops=38e12))
    assert fast.status == Outcome.FAIL and abs(fast.measured - 0.05) < 1e-9
    # 0.4 s on 8 devices of 9.5 TFLOPS that are not P100: normalised, and the same
    assert record(stored(0.4, "8 x other GPU", devices=8, peak_flops=9.5e12)).status == Outcome.PASS
    # no peak recorded, or a reduced run: not comparable, never a raw comparison
    for results in (stored(0.4, "1 x CPU", devices=1), stored(0.4, "8 x NVIDIA Tesla P100", "reduced: 100 steps", devices=8)):
        none = record(results)
        assert none.status == Outcome.NOT_RUN and "not comparable" in none.detail
    # the whole run's mean (start-up and compilation in it) is not Section 5.2's steady-state step
    mean = record(stored(0.4, "8 x NVIDIA Tesla P100", devices=8, measure="step-time.run-mean"))
    assert mean.status == Outcome.NOT_RUN and "'step-time.run-mean', not as the claim's" in mean.detail
    steady = record(stored(0.4, "8 x NVIDIA Tesla P100", devices=8, measure="step-time.steady-state"))
    assert steady.status == Outcome.PASS


def test_figures_3_5_are_measured_on_the_run_s_checkpoint(tmp_path, tiny_run):
    claim = CLAIMS["fig3-5.attention-from-run"]
    record = run_claim(claim, CHECKERS[claim.checker], ReproAdapter(), tiny_run(tmp_path))
    assert record.status == Outcome.PASS and "Figure 3" in record.detail
    same = tmp_path / "same"
    same.mkdir()
    assert run_claim(claim, CHECKERS[claim.checker], ReproAdapter(), tiny_run(same, True)).status == Outcome.FAIL
    assert run_claim(claim, CHECKERS[claim.checker], ReproAdapter(), {}).status == Outcome.NOT_RUN


# -- Section 5.4 on both forms of the objective the loop runs --------------------------------------
def test_label_smoothing_watches_the_dense_loss_a_gpu_job_runs() -> None:
    """The paper's jobs run the dense loss on an accelerator (repro.train.loss.loss_impl_for); a
    mistake there alone (padding counted in the loss, half the smoothing term in the value) fails
    the claim, which passes on the code as it is."""
    import repro.audit.repro_adapter as repro_adapter
    import repro.train.loss as loss

    assert outcome("sec5.label-smoothing.loss") == Outcome.PASS
    real = loss.dense_projection_loss

    def counts_padding(hidden, weight, target, *, epsilon, pad_id, scale=1.0):
        summed, nll, count = real(hidden, weight, target, epsilon=epsilon, pad_id=pad_id, scale=scale)
        logits = hidden.reshape(-1, hidden.size(-1)) @ weight.t()
        pad = target.reshape(-1) == pad_id
        return summed + logits.logsumexp(-1)[pad].sum() * scale, nll, count

    with mock.patch.object(repro_adapter, "dense_projection_loss", counts_padding):
        assert outcome("sec5.label-smoothing.loss") == Outcome.FAIL
    assert set(ReproAdapter().loss_paths()) == set(loss.LOSS_IMPLS)
