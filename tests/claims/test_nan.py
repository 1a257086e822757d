"""NaN and infinity never pass (issue 28): every checker family is fed NaN and inf and must say fail.

Three ways in, as a broken implementation or run would bring them:

* an implementation whose every output is NaN (or inf): :class:`Poisoned` wraps repro's own
  adapter and replaces every number it hands back (tensors, rates, modules' outputs, the
  weights of the modules it builds, the distributions a search is given) by NaN or inf; every
  checker that audits an implementation runs on it;
* repro's own code paths (the job-based claims, the evaluation's search and averaging, the loop):
  the piece they watch is patched to produce NaN;
* stored results (metrics, step times, relations, Table 2's cost of a run) holding NaN.

Checkers whose measurement is a count of integers, shapes or token ids (no float flows into it)
are listed in :data:`INTEGER_VALUED` with the reason; every registered checker must be in one of
the tables, so a new checker cannot escape this test.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
from collections.abc import Callable
from unittest import mock

import pytest
import torch
from torch import nn

import repro.checks.evaluation_average as evaluation_average
import repro.checks.parser_recipe as parser_recipe
import repro.checks.rank_group as rank_group
import repro.checks.recipe_runs as recipe_runs
import repro.checks.runtime_choice as runtime_choice
import repro.checks.training as training
from repro.audit.adapter import Adapter
from repro.audit.repro_adapter import ReproAdapter
from repro.checks import AUDITING, CHECKERS, select_claims
from repro.claims import Claim, Outcome
from repro.claims.compare import NonFinite, Worst, changed, finite, max_abs_diff, within
from repro.claims.runner import run_claim
from repro.results.provenance import Provenance
from repro.results.store import Result

CLAIMS = select_claims()
BY_CHECKER: dict[str, Claim] = {}
for _claim in CLAIMS:
    BY_CHECKER.setdefault(_claim.checker, _claim)
BAD = {"nan": float("nan"), "inf": float("inf")}


# -- the helper itself ---------------------------------------------------------------------------
@pytest.mark.parametrize("bad", BAD.values(), ids=BAD)
def test_the_helper_refuses_non_finite_values(bad):
    t = torch.tensor([0.0, bad])
    with pytest.raises(NonFinite):
        max_abs_diff(t, torch.zeros(2))
    with pytest.raises(NonFinite):
        max_abs_diff(torch.zeros(2), t)
    with pytest.raises(NonFinite):
        changed(t, torch.zeros(2), 1e-6, 0)
    with pytest.raises(NonFinite):
        Worst().add(bad)
    with pytest.raises(NonFinite):
        finite({"a": [1.0, bad]})
    assert not within(bad, 0.0, abs_tol=1e30)
    assert not within(bad, 0.0, bound="at_least") and not within(bad, 0.0, bound="at_most")


@pytest.mark.parametrize("bad", BAD.values(), ids=BAD)
def test_a_claim_never_takes_a_non_finite_value(bad):
    claim = BY_CHECKER["embedding.scale"]
    for kwargs in ({"tolerance": {"abs": 1e300}}, {"tolerance": {}, "bound": "at_least"}, {"tolerance": {}, "bound": "at_most"}):
        assert not dataclasses.replace(claim, **kwargs).within(bad)
    assert not dataclasses.replace(claim, expected=True, tolerance={}).within(bad)   # bool(nan) is True
    assert not dataclasses.replace(claim, expected=[1.0], tolerance={"abs": 1.0}).within([bad])


def test_the_engine_fails_a_checker_that_passes_nan():
    from repro.claims.outcome import Measurement

    claim = BY_CHECKER["embedding.scale"]
    assert run_claim(claim, lambda c, ctx: Measurement(float("nan"), True), ReproAdapter()).status == Outcome.FAIL
    assert run_claim(claim, lambda c, ctx: Measurement({"x": float("inf")}, True), ReproAdapter()).status == Outcome.FAIL

    def raises(c, ctx):
        finite(float("nan"), "x")

    assert run_claim(claim, raises, ReproAdapter()).status == Outcome.FAIL


# -- an implementation whose every number is NaN or inf ---------------------------------------------
def poison(value, bad: float):
    """``value`` with every float in it replaced by ``bad`` (modules' outputs and weights too)."""
    if isinstance(value, torch.Tensor):
        return torch.full_like(value, bad) if value.is_floating_point() else value
    if isinstance(value, bool) or isinstance(value, (int, str)) or value is None:
        return value
    if isinstance(value, float):
        return bad
    if isinstance(value, torch.optim.Optimizer):
        value.register_step_post_hook(lambda opt, *_: [p.data.fill_(bad) for g in opt.param_groups for p in g["params"]])
        return value
    if isinstance(value, nn.Module):  # every sub-module's output becomes NaN (the same objects: shared parts stay shared)
        for module in value.modules():
            module.register_forward_hook(lambda m, args, out: poison(out, bad))
        return value
    if isinstance(value, dict):
        return {k: poison(v, bad) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(poison(v, bad) for v in value)
    if dataclasses.is_dataclass(value):
        return dataclasses.replace(value, **{f.name: poison(getattr(value, f.name), bad)
                                             for f in dataclasses.fields(value)})
    if callable(value):
        return lambda *args, **kwargs: poison(value(*args, **kwargs), bad)
    return value


class Poisoned(Adapter):
    """repro's own adapter, every number it hands back NaN (or inf); a search is given NaN distributions."""

    def __init__(self, bad: float) -> None:
        self.bad, self.inner, self.name = bad, ReproAdapter(), f"repro poisoned with {bad}"

    def __getattribute__(self, attr: str):
        if attr.startswith("_") or attr in ("bad", "inner", "name", "has_repro_presets") \
                or not callable(getattr(Adapter, attr, None)):
            return object.__getattribute__(self, attr)
        inner = getattr(self.inner, attr)
        bad = self.bad
        if attr in ("search", "beam_search", "hyperparameters"):  # token ids and settings: see SEARCH_VALUED
            return inner
        return lambda *args, **kwargs: poison(inner(*args, **kwargs), bad)


#: Checkers of the audit whose measurement holds no float: counts of shapes or parameters, the
#: widths of outputs, token ids.
INTEGER_VALUED = {
    "embedding.shared": "compares which tensors are one (data pointers), no number",
    "table3.params": "counts parameters of shapes",
    "table3.params_trained": "counts parameters of shapes and the scalars Adam steps",
    "table3.params_difference": "counts parameters of shapes",
    "table3.implied_vocabulary": "fits the paper's counts to parameter counts of shapes",
    "model.base_dimensions": "reads shapes of matrix products",
    "recipe.value": "reads settings (poisoned to NaN they fail: tested below)",
    "training.checkpoint_cadence": "counts updates between checkpoints",
    "training.checkpoint_clock": "counts updates between checkpoints (repro's own loop, not audited)",
    "run.tokens_per_update": "counts tokens",
    "run.batch_by_length": "counts padding positions",
    "run.batch_order": "correlates the places of pairs among passes (positions it counts)",
    "run.batch_side_tokens": "counts tokens",
    "run.shared_vocabulary": "counts word pieces",
    "run.pair_direction": "compares decoded sentences",
    "run.shifted_right": "compares token ids",
    "run.job_dimensions": "reads shapes of matrix products",
    "run.job_steps": "counts updates",
    "run.lengths_below_width": "counts sentence lengths",
    "run.parser_training_size": "counts sentences",
    "decode.max_length": "counts output tokens",
    "decode.early_stop": "counts decoding steps",
    "decode.finished_stay_finished": "counts prefixes continued past their EOS",
    "decode.special_ids": "counts special ids in the outputs",
    "decode.beam_width": "counts ranks found",
    "decode.eos_in_beam": "counts outputs that end at a given EOS",
    "run.encoded_tokens": "counts tokens",
    "run.encoded_cache_key": "counts reuse decisions and token ids",
    "run.step_time_resumed": "times updates on a clock it injects (whole seconds)",
    "run.norms_per_layer": "counts normalisations",
    "run.master_weights": "counts dtypes",
    "run.main_rank": "lists the steps of checkpoint files",
    "run.shard_order": "compares tagged items",
    "run.rank_devices": "counts devices chosen",
    "run.auto_precision": "counts precisions chosen",
    "run.checkpoints_kept": "lists the steps of checkpoint files",
    "run.resume_newest": "which checkpoint's weights equal the resumed model's (torch.equal: NaN equals none)",
    "run.divergence_stop": "feeds inf and NaN itself: whether every rank stopped",
    "run.nonfinite_stored": "feeds inf and NaN itself: how they are stored",
    "run.bleu_stored": "counts measurements storing another protocol's score",
    "evalb.rules": "counts EVALB cases and output lines that differ (brackets and words, no float)",
    "parse.linearization": "counts trees and sequences read back wrongly",
    "scaled.table3_jobs": "counts cells and seeds of the planned jobs that differ",
    "run.resume_ranks": "counts (rank, update) pairs whose examples differ (token ids)",
    "run.vocabulary_size": "counts vocabulary entries",
    "parse.scoring": "counts sentences not scored as a perfect parse (EVALB's bracket counts)",
}
#: The search's claims: their value comes from the tokens it outputs (no float can reach it), so
#: NaN is fed into the scores it ranks by (OWN_PATHS below).
SEARCH_VALUED = {"decode.ranking", "decode.alpha", "decode.cut_scored"}


def _outcome(checker: str, adapter, results=None) -> Outcome:
    claim = BY_CHECKER[checker]
    return run_claim(claim, CHECKERS[claim.checker], adapter, results or {}).status


AUDITED = sorted(c for c in AUDITING if c in BY_CHECKER and c not in INTEGER_VALUED and c not in SEARCH_VALUED)


@pytest.mark.parametrize("bad", BAD.values(), ids=BAD)
@pytest.mark.parametrize("checker", AUDITED)
def test_an_implementation_of_nan_fails_every_claim_that_audits_it(checker, bad):
    status = _outcome(checker, Poisoned(bad))
    assert status in (Outcome.FAIL, Outcome.NOT_APPLICABLE), status
    if status == Outcome.NOT_APPLICABLE:  # only the claims of repro's own runs: they are patched below
        assert checker in OWN_PATHS, f"{checker} is not applicable to a poisoned adapter and has no patch below"


# -- repro's own code paths, patched to produce NaN ----------------------------------------------------
def _nan_model_forward(bad):
    from repro.model import Transformer

    original = Transformer.forward
    return mock.patch.object(Transformer, "forward", lambda self, *a, **k: torch.full_like(original(self, *a, **k), bad))


def _nan_search(bad):
    """The search ranks its hypotheses by NaN: GNMT's length penalty gives NaN."""
    import repro.decode.beam as beam

    return mock.patch.object(beam, "length_penalty", lambda length, alpha: bad)


def _nan_attention(bad):
    """Eq. 1's weights times NaN (or inf): the attention the figures draw."""
    import repro.model.attention as attention

    original = attention.scaled_dot_product_attention
    return mock.patch.object(attention, "scaled_dot_product_attention",
                             lambda *a, **k: tuple(x * bad for x in original(*a, **k)))


@contextlib.contextmanager
def _nan_rates(bad):
    with mock.patch.object(training, "job_rates", lambda cfg, steps: [bad for _ in steps]), \
            mock.patch.dict(training._APPLIED, clear=True):
        yield


def _nan_adam(bad):
    original = training.loop_adam_updates

    def broken(*args, **kwargs):
        seen = original(*args, **kwargs)
        return dataclasses.replace(seen, after=[torch.full_like(a, bad) for a in seen.after])

    return mock.patch.object(training, "loop_adam_updates", broken)


def _nan_loss(bad):
    import repro.train.loss as loss_module

    original = loss_module.projection_loss

    def broken(*args, **kwargs):
        kwargs["epsilon"] = bad
        return original(*args, **kwargs)

    return mock.patch.object(loss_module, "projection_loss", broken)


def _nan_dropout(bad):
    original = recipe_runs.observe
    return mock.patch.object(recipe_runs, "observe", lambda name, o, c, p: original(name, torch.full_like(o, bad), c, p))


def _nan_average(bad):
    original = evaluation_average._embedding_seen
    return mock.patch.object(evaluation_average, "_embedding_seen",
                             lambda run: [torch.full_like(t, bad) for t in original(run)])


def _nan_perplexity(bad):
    import repro.eval.perplexity as ppl

    original = ppl.Perplexity
    return mock.patch.object(ppl, "Perplexity", lambda value, nll, tokens: original(bad, nll, tokens))


def _nan_positions(bad):
    from repro.model import Transformer

    original = Transformer._embed
    return mock.patch.object(Transformer, "_embed", lambda self, *a, **k: torch.full_like(original(self, *a, **k), bad))


def _nan_objective(bad):
    return mock.patch.object(recipe_runs, "objective_epsilon", lambda cfg: [bad])


def _nan_gradient(bad):
    original = recipe_runs.accumulate

    def broken(objective, micro, *args, **kwargs):
        out = original(objective, micro, *args, **kwargs)
        for p in objective.parameters():
            if p.grad is not None:
                p.grad.fill_(bad)
        return out

    return mock.patch.object(recipe_runs, "accumulate", broken)


def _nan_logits(bad):
    """The model's logits times NaN (or inf), the autograd graph kept (the check back-propagates them)."""
    from repro.model import Transformer

    original = Transformer.forward
    return mock.patch.object(Transformer, "forward", lambda self, *a, **k: original(self, *a, **k) * bad)


def _nan_decoder(bad):
    """The decoder's hidden states times NaN (or inf): the objective's loss and gradients, eager and compiled."""
    from repro.model import Transformer

    original = Transformer.decode
    return mock.patch.object(Transformer, "decode", lambda self, *a, **k: original(self, *a, **k) * bad)


@contextlib.contextmanager
def _group_changed(change):
    """The two-rank group observed again (not taken from the cache), each rank's record passed
    through ``change``."""
    original = rank_group.observe_group

    def broken(*args, **kwargs):
        seen = original(*args, **kwargs)
        for rank in seen:
            change(rank)
        return seen

    rank_group._observed.cache_clear()
    try:
        with mock.patch.object(rank_group, "observe_group", broken):
            yield
    finally:
        rank_group._observed.cache_clear()


def _nan_group(bad):
    """The two ranks' gradients and rates come back NaN."""
    def change(rank):
        rank["grads"] = {n: torch.full_like(g, bad) for n, g in rank["grads"].items()}
        rank["rates"] = [bad for _ in rank["rates"]]
    return _group_changed(change)


def _nan_sharded_perplexity(bad):
    """Each rank's share of the sharded perplexity comes back NaN (or inf)."""
    return _group_changed(lambda rank: rank.update(perplexity=[bad for _ in rank["perplexity"]]))


def _nan_resumed_weights(bad):
    """The checkpoints the exact-resume claim reads back hold NaN (or inf) weights."""
    import repro.checks.checkpoint_keeping as checkpoint_keeping

    original = checkpoint_keeping.load_checkpoint

    def broken(*args, **kwargs):
        state = original(*args, **kwargs)
        return {**state, "model": {k: torch.full_like(v, bad) for k, v in state["model"].items()}}

    return mock.patch.object(checkpoint_keeping, "load_checkpoint", broken)


def _nan_gpu_adam(bad):
    original = runtime_choice.optimizer_updates

    def broken(*args, **kwargs):
        seen = original(*args, **kwargs)
        return dataclasses.replace(seen, after=[torch.full_like(a, bad) for a in seen.after])

    return mock.patch.object(runtime_choice, "optimizer_updates", broken)


def _nan_read_late(bad):
    """Both runs of the read-late claim log a non-finite loss (equal to itself where it is infinite)."""
    import repro.checks.read_late as read_late

    original = read_late.read_log
    return mock.patch.object(read_late, "read_log",
                             lambda path: [dataclasses.replace(r, loss=bad) for r in original(path)])


#: The checkers of repro's own runs (not applicable to another implementation), each with the piece
#: of its code path that is made to produce NaN or inf.
OWN_PATHS: dict[str, Callable] = {
    "decode.ranking": _nan_search, "decode.alpha": _nan_search, "decode.cut_scored": _nan_search,
    "training.adam": _nan_adam, "training.lr_peak": _nan_rates, "training.loop_rates": _nan_rates,
    "training.recipe_peak": _nan_rates,
    "run.objective_smoothing": _nan_objective, "run.job_dropout": _nan_dropout,
    "run.perplexity_per_wordpiece": _nan_perplexity, "run.evaluation_average": _nan_average,
    "run.job_positions": _nan_positions, "run.position_extrapolation": _nan_positions,
    "run.parser_unchanged": lambda bad: mock.patch.object(parser_recipe, "objective_epsilon", lambda cfg: [bad]),
    "run.update_gradient": _nan_gradient, "model.base_dimensions": None,
    "run.update_arithmetic": _nan_logits, "run.dropout_places": _nan_logits,
    "run.smoothing_spread": _nan_loss, "run.ddp_update": _nan_group,
    "run.ddp_rate": _nan_group, "decode.cached_every_architecture": _nan_decoder, "run.gpu_optimizer": _nan_gpu_adam,
    "run.resume_exact": _nan_resumed_weights, "run.read_late": _nan_read_late,
    "run.sharded_perplexity": _nan_sharded_perplexity,
    "run.compiled_shapes": _nan_decoder, "decode.trained_scores": _nan_decoder,
    "model.parameters_used": _nan_logits, "figures.attention_drawn": _nan_attention,
}


@pytest.mark.parametrize("bad", BAD.values(), ids=BAD)
@pytest.mark.parametrize("checker", sorted(c for c, patch in OWN_PATHS.items() if patch is not None))
def test_repro_s_own_code_path_producing_nan_fails(checker, bad):
    with OWN_PATHS[checker](bad):
        assert _outcome(checker, ReproAdapter()) == Outcome.FAIL


# -- checkers of the project's own reference layers and of the paper's arithmetic -------------------------
def _nan_flops(bad):
    import repro.checks.section4 as section4

    return mock.patch.object(section4, "_flops", lambda layer, n, d: bad)


def _nan_complexity(bad):
    import repro.checks.table1 as table1

    original = table1.measure_complexity

    def broken(*args, **kwargs):
        result = original(*args, **kwargs)
        return dataclasses.replace(result, fit=dataclasses.replace(result.fit, exponents={k: bad for k in result.fit.exponents}))

    return mock.patch.object(table1, "measure_complexity", broken)


def _nan_sequential(bad):
    import repro.checks.table1 as table1

    original = table1.measure_sequential

    def broken(*args, **kwargs):
        result = original(*args, **kwargs)
        return dataclasses.replace(result, fit=dataclasses.replace(result.fit, exponents={k: bad for k in result.fit.exponents}))

    return mock.patch.object(table1, "measure_sequential", broken)


def _nan_path(bad):
    import repro.checks.table1 as table1

    original = table1.path_point
    return mock.patch.object(table1, "path_point", lambda *a, **k: {**original(*a, **k), "max_path": bad})


def _nan_bleu(bad):
    import repro.checks.bleu_protocol as bleu_protocol

    original = bleu_protocol.score
    return mock.patch.object(bleu_protocol, "score", lambda *a, **k: dataclasses.replace(original(*a, **k), score=bad))


def _nan_bleu_case(bad):
    import repro.checks.bleu_case as bleu_case

    original = bleu_case.score
    return mock.patch.object(bleu_case, "score", lambda *a, **k: dataclasses.replace(original(*a, **k), score=bad))


def _nan_bleu_language(bad):
    import repro.eval.translation as translation

    original = translation.score
    return mock.patch.object(translation, "score", lambda *a, **k: dataclasses.replace(original(*a, **k), score=bad))


def _nan_normalised(bad):
    import repro.checks.step_time as step_time

    return mock.patch.object(step_time, "normalised", lambda *a, **k: (bad, None))


def _nan_seeds(bad):
    import repro.checks.verdict_statistics as verdict_statistics

    original = verdict_statistics.over_seeds
    return mock.patch.object(verdict_statistics, "over_seeds",
                             lambda *a, **k: dataclasses.replace(original(*a, **k), half_width=bad))


def _nan_additive(bad):
    import repro.checks.dot_product as dot_product

    original = dot_product.AdditiveAttention.forward
    return mock.patch.object(dot_product.AdditiveAttention, "forward",
                             lambda self, *a: torch.full_like(original(self, *a), bad))


REFERENCE_PATCHES: dict[str, Callable] = {
    "section4.attention_vs_recurrent": _nan_flops, "section4.convolution_factor_k": _nan_flops,
    "section4.separable_convolution": _nan_flops, "table1.complexity": _nan_complexity,
    "table1.sequential": _nan_sequential, "table1.path": _nan_path, "bleu.paper_protocol": _nan_bleu,
    "bleu.case": _nan_bleu_case, "bleu.target_language": _nan_bleu_language, "scaled.verdict_statistics": _nan_seeds,
    "attention.additive_space": _nan_additive, "attention.additive_speed": _nan_additive,
    "step_time.normalisation": _nan_normalised,
}


@pytest.mark.parametrize("bad", BAD.values(), ids=BAD)
@pytest.mark.parametrize("checker", sorted(REFERENCE_PATCHES))
def test_reference_measurements_producing_nan_fail(checker, bad):
    with REFERENCE_PATCHES[checker](bad):
        assert _outcome(checker, ReproAdapter()) == Outcome.FAIL


@pytest.mark.parametrize("bad", BAD.values(), ids=BAD)
def test_the_paper_s_arithmetic_on_nan_fails(bad):
    claim = dataclasses.replace(BY_CHECKER["table2.cost"], params={"hours": bad, "gpus": 8, "gpu": "P100"})
    assert run_claim(claim, CHECKERS["table2.cost"], ReproAdapter()).status == Outcome.FAIL
    setting = BY_CHECKER["recipe.value"]

    class Settings(ReproAdapter):
        def hyperparameters(self):
            return {setting.params["key"]: bad}

    assert run_claim(setting, CHECKERS["recipe.value"], Settings()).status == Outcome.FAIL


# -- stored results holding NaN --------------------------------------------------------------------
def _stored(claim_id: str, value, **extra) -> Result:
    prov = Provenance(commit="0" * 40, config_hash="x", hardware="NVIDIA P100 x 8", dataset="d",
                      date=dt.datetime.now(dt.timezone.utc).isoformat(), scale="cluster: test",
                      extra={"devices": 8, "peak_flops": 9.5e12, **extra})
    return Result(claim_id, value, prov, unit="u")


STORED = ["metric.result", "metric.step_time", "relation.expression", "table2.cost_from_run"]


@pytest.mark.parametrize("bad", BAD.values(), ids=BAD)
@pytest.mark.parametrize("checker", STORED)
def test_a_stored_nan_fails(checker, bad):
    claim = BY_CHECKER[checker]
    if checker == "relation.expression":
        from repro.checks.relations import operands

        results = {cid: _stored(cid, bad) for cid in operands(claim)}
    elif checker == "table2.cost_from_run":
        results = {claim.params["step_time_claim"]: _stored(claim.params["step_time_claim"], bad)}
    else:
        results = {claim.id: _stored(claim.id, bad)}
    assert run_claim(claim, CHECKERS[checker], ReproAdapter(), results).status == Outcome.FAIL


@pytest.mark.parametrize("bad", BAD.values(), ids=BAD)
def test_attention_maps_of_nan_fail(tmp_path, bad, tiny_run):
    import repro.checks.attention_maps as attention_maps

    original = attention_maps.encoder_attention
    claim = BY_CHECKER["run.attention_maps"]
    with mock.patch.object(attention_maps, "encoder_attention", lambda *a, **k: torch.full_like(original(*a, **k), bad)):
        assert run_claim(claim, CHECKERS[claim.checker], ReproAdapter(), tiny_run(tmp_path)).status == Outcome.FAIL


# -- a run's own records holding NaN (repro check --run) ----------------------------------------------
def _paper_run(tmp_path, bad) -> tuple[object, dict[str, Callable]]:
    """The records of a run of the paper's base job, in memory, and for each checker of basis ``run``
    the one edit that puts ``bad`` into what it reads."""
    from repro.observed.run_files import Checkpoint, LoggedRow, RunFiles
    from repro.recipes import get_recipe
    from repro.train.schedule import learning_rate

    recipe = get_recipe("base").to_dict()
    model = {**get_recipe("base").model.to_dict(), "src_vocab_size": 37000, "tgt_vocab_size": 37000}
    step = 100000
    name = f"step_{step:08d}.pt"
    newest = Checkpoint(tmp_path / "checkpoints" / name, step, model, dict(recipe["train"]), recipe,
                        {"src_embed.lut.weight": (37000, 512), "encoder_layers.0.feed_forward.w_1.weight": (2048, 512),
                         "encoder_layers.0.self_attn.w_q.weight": (512, 512),
                         "encoder_layers.0.self_attn.w_v.weight": (512, 512)},
                        [{"lr": learning_rate(step, 512), "betas": (0.9, 0.98), "eps": 1e-9}], {})
    prov = Provenance(commit="0" * 40, config_hash="x", hardware="8x NVIDIA P100", dataset="d", date="2026-01-01",
                      scale="cluster: test", extra={"measure": "bleu.tokenized-compound-split", "split": "test",
                                                    "averaged_from": [name], "checkpoints_averaged": 1,
                                                    "decode": dict(recipe["decode"]), "test_set": {
                                                        "sentences": 3003, "source": {"lines": 3003},
                                                        "reference": {"lines": 3003}}})
    evaluation = Result("table2.bleu.base-ende", 27.3, prov)
    files = RunFiles(tmp_path, record={"recipe": recipe, "steps": step, "vocabulary": {"size": 37000, "sha256": "a"},
                                       "corpus": {"pairs": 4_500_000, "trained": 4_500_000, "filtered": 0},
                                       "sessions": [{"resumed_from": 0, "ended_at": step, "devices": 8,
                                                     "hardware": "8x NVIDIA P100 (CUDA 12)"}]},
                     metrics=[LoggedRow(i + 2, s, learning_rate(s, 512), 25000, 25000)   # every log_every updates
                              for i, s in enumerate(range(recipe["train"]["log_every"], step + 1, recipe["train"]["log_every"]))],
                     checkpoints=[newest.path], kept=[newest], newest=newest, vocab_size=37000, vocab_sha256="a",
                     evaluations={evaluation.claim_id: (tmp_path / "evaluations" / "e.json", evaluation)})

    def row(**change):
        files.metrics[-1] = dataclasses.replace(files.metrics[-1], **change)

    def evaluated(**change):
        extra = files.evaluations[evaluation.claim_id][1].provenance.extra
        for key, value in change.items():
            extra[key] = value

    edits = {
        "observed.eq3": lambda: row(lr=bad), "observed.warmup": lambda: row(lr=bad),
        "observed.tokens": lambda: row(src_tokens=bad),
        "observed.label_smoothing_loss": lambda: row(loss=bad, nll=2.0),
        "observed.adam": lambda: newest.optimizer[0].update(betas=(bad, 0.98)),
        "observed.updates": lambda: files.record.update(steps=bad),
        "observed.setting": lambda: newest.model_config.update(dropout=bad),
        "observed.dimensions": lambda: newest.model_config.update(n_heads=bad),
        "observed.architecture": lambda: newest.model_config.update(norm_first=bad),
        "observed.vocabulary": lambda: files.record["vocabulary"].update(size=bad),
        "observed.corpus": lambda: files.record["corpus"].update(pairs=bad),
        "observed.hardware": lambda: files.record["sessions"][0].update(devices=bad),
        "observed.train_time": lambda: files.record["sessions"][0].update(step_time={"total_s": bad}),
        "observed.checkpoints": lambda: recipe["train"].update(checkpoint_every_steps=0, checkpoint_every_minutes=bad),
        "observed.average": lambda: evaluated(checkpoints_averaged=bad),
        "observed.average_spacing": lambda: evaluated(checkpoints_averaged=bad),
        "observed.search": lambda: evaluated(decode={**recipe["decode"], "beam_size": bad}),
        "observed.protocol": lambda: setattr(files, "evaluations", {evaluation.claim_id: (
            tmp_path / "e.json", dataclasses.replace(evaluation, measured=bad))}),
        "observed.test_set": lambda: evaluated(test_set={"sentences": bad, "source": {"lines": 3003},
                                                          "reference": {"lines": 3003}}),
        "observed.held_out": lambda: evaluated(test_set={"sentences": bad, "source": {"lines": 3003},
                                                          "reference": {"lines": 3003}}),
        "observed.metric": lambda: setattr(files, "evaluations", {evaluation.claim_id: (
            tmp_path / "e.json", dataclasses.replace(evaluation, measured=bad))}),
    }
    return files, edits


RUN_RECORDS = sorted(c for c in CHECKERS if c.startswith("observed."))


@pytest.mark.parametrize("bad", BAD.values(), ids=BAD)
@pytest.mark.parametrize("checker", RUN_RECORDS)
def test_a_run_record_holding_nan_fails(tmp_path, checker, bad):
    files, edits = _paper_run(tmp_path, bad)
    claim = BY_CHECKER.get(checker) or dataclasses.replace(next(c for c in CLAIMS if c.id == "table2.bleu.base-ende"),
                                                           basis="run", checker=checker)
    before = run_claim(claim, CHECKERS[checker], files)
    edits[checker]()
    record = run_claim(claim, CHECKERS[checker], files)
    assert record.status == Outcome.FAIL and record.detail != before.detail, (checker, record.status, record.detail)


def test_every_checker_is_fed_nan_somewhere():
    covered = set(AUDITED) | set(INTEGER_VALUED) | set(OWN_PATHS) | set(REFERENCE_PATCHES) | set(STORED) \
        | set(RUN_RECORDS) | {"table2.cost", "recipe.value", "run.attention_maps"}
    used = {c.checker for c in CLAIMS}
    assert sorted(used - covered) == []
