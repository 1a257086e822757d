"""After a job trains: measure the claims it serves on the trained model and store the results.

Each claim names its measurement (``params.measure`` and ``params.split``, :mod:`repro.claims.measure_names`),
resolved when the job is planned (the spec's ``measures``) and taken by the one registry the local
jobs use too (:mod:`repro.measures`), never chosen by the claim's id:

- the model is the average of exactly the recipe's last k checkpoints (Section 6.1: 5 base, 20 big,
  1 for Table 3's rows: "no checkpoint averaging"; a run with fewer is refused, never averaged over
  what there is), searched with the spec's decoding settings (beam 4, alpha 0.6, input + 50; the
  parser's beam 21, alpha 0.3, input + 300);
- ``bleu.tokenized-compound-split`` (Table 2 on newstest2014, Table 3 on newstest2013): the paper's
  protocol, sacreBLEU kept beside it; ``perplexity.wordpiece``: per wordpiece; ``f1.evalb`` (Table 4,
  WSJ section 23): repaired trees scored by EVALB (COLLINS.prm); ``step-time.steady-state`` (Section 5.2):
  the median seconds of this job's steady updates (start-up, warm-up, compilation, evaluation and
  checkpoint writes left out and stored beside it by name), with the device count and a measured peak
  so the reporter can normalise it to 8 P100 (none stored when this run of the job made no steady
  update: a requeued job that resumed at its last step);
- a job of Table 3 at a named scale (``repro submit table3 --scale``) stores its records under
  ``table3-<scale>.<ppl|bleu>.<row>``, measured as the row's claim names, the perplexity with a
  bootstrap over sentences too, the parameter count in ``extra``; as ``<claim>/seed-<S>-<signature>.json``
  (one record per seed, replaced in place) at scale ``<scale>: ...``, never ``cluster:``.

Everything runs on the job's :class:`~repro.runtime.Runtime` (rank 0's GPU, in the recipe's precision).

A result counts for the paper only when the run used the paper's recipe: its provenance scale
starts with ``cluster:`` then; a run changed with ``repro submit --set`` (fewer steps, smaller
batches, another dataset) is recorded with the scale ``reduced:``, which the reporter never
takes for a reproduction.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from repro.claims.measure_names import MODEL_MEASURES
from repro.data.corpora import get_dataset, resolve_data_dir
from repro.data.vocab import SharedVocab
from repro.decode.settings import DecodeSettings
from repro.decode.translate import load_model
from repro.errors import ConfigError
from repro.eval.sharding import main_first
from repro.measures import Request, Trained, claim_requests, measure, record
from repro.measures.run_dev import evaluate_dev, measures_dev
from repro.model import count_parameters
from repro.results import ResultStore
from repro.runtime import Runtime
from repro.train.average import average_last as average, averaged_identities
from repro.train.checkpoint import list_checkpoints
from repro.train.config import PLACEMENT_FIELDS, TrainConfig
from repro.train.loop import runtime_of

log = logging.getLogger("repro.cluster.job_evaluation")


def run_scale(spec: dict[str, Any], summary: dict[str, Any], world: int) -> str:
    """``cluster: ...`` for the paper's recipe run to its end, ``reduced: ...`` otherwise; a job of
    Table 3 at a named scale: ``<scale>: ...`` (:func:`scaled_run_scale`)."""
    if spec.get("scaled"):
        return scaled_run_scale(spec, summary, world)
    train = spec["train"]
    full = not spec.get("overrides") and summary.get("steps", 0) >= train["max_steps"]
    kind = "cluster" if full else "reduced"
    why = "" if full else f" (changed: {', '.join(sorted(spec.get('overrides') or {})) or 'stopped early'})"
    return (f"{kind}: profile {spec.get('profile')}, {world} process(es), {summary.get('steps')} steps x "
            f"{train['tokens_per_batch']} tokens per side per update, preset {spec['preset']}{why}")


def scaled_run_scale(spec: dict[str, Any], summary: dict[str, Any], world: int) -> str:
    """``small: ...``: the scale's name first, then what ran; never a reproduction of the paper's figures."""
    scaled, train = spec["scaled"], spec["train"]
    model = TrainConfig.from_dict(train, source=f"job {spec.get('name')}").model_config()
    changed = sorted(k for k in spec.get("overrides") or {} if k not in PLACEMENT_FIELDS)
    stopped = "" if summary.get("steps", 0) >= train["max_steps"] else f", stopped at {summary.get('steps')}"
    return (f"{scaled['scale']}: Table 3 row {scaled['row']}, seed {scaled['seed']}, {train['dataset']}, "
            f"{summary.get('steps')} steps x {train['tokens_per_batch']} tokens per side{stopped}, "
            f"d_model={model.d_model}, N={model.n_layers}, d_ff={model.d_ff}, h={model.n_heads}, "
            f"profile {spec.get('profile')}, {world} process(es), signature {scaled['signature']}"
            + (f"; changed by --set: {', '.join(changed)}" if changed else "") + "; not the paper's scale")


def _model(out_dir: Path, average_last: int, runtime: Runtime):
    """The model the claims are measured on: the average of exactly the last ``average_last``
    checkpoints (Section 6.1), on the runtime's device; fewer checkpoints is an error. Returns the
    model, its file, the checkpoints averaged into it (as that file names them) and their identities
    (:func:`repro.train.average.averaged_identities`)."""
    checkpoints = list_checkpoints(out_dir)
    if not checkpoints:
        raise ConfigError(f"{out_dir}: the job wrote no checkpoint to evaluate")
    if len(checkpoints) < average_last:
        raise ConfigError(f"{out_dir / 'checkpoints'}: the recipe averages the last {average_last} checkpoints "
                          f"(Section 6.1) but the run kept {len(checkpoints)}; an average of fewer is not the "
                          "paper's model (train longer, or checkpoint more often: checkpoint_every_steps)")
    path = checkpoints[-1]
    if average_last > 1:   # rank 0 averages, the other ranks load what it wrote
        path = out_dir / f"average_last{average_last}.pt"
        main_first(lambda: average(out_dir, average_last, path), runtime)
    model, state = load_model(path, runtime=runtime)
    return model.eval(), path, tuple(state.get("averaged_from") or (path.name,)), averaged_identities(state, path)


def job_requests(spec: dict[str, Any]) -> list[Request]:
    """What the job measures: for each claim it serves, the measurement its claim names, as the job was
    planned with it (``spec["measures"]``), else (a spec written before jobs carried them) as the
    project's claims name it now."""
    claims = list(spec.get("claims", []))
    planned = {}
    for i, data in enumerate(spec.get("measures") or []):
        request = Request.from_dict(data, source=f"job {spec.get('name')}: field 'measures[{i}]'")
        planned[request.result_id] = request
    missing = [c for c in claims if c not in planned]
    if missing:
        planned.update({r.result_id: r for r in claim_requests(missing)})
    return [planned[c] for c in claims]


def evaluate_claims(spec: dict[str, Any], summary: dict[str, Any], world: int, results_dir: str | Path, *,
                    runtime: Runtime | None = None) -> list[Path]:
    """Measure each claim of ``spec`` by the measurement its claim names (:mod:`repro.measures`) on
    ``runtime`` (default: the job config's device and precision); write one result per claim. Called on
    every rank of a job: the decoding and perplexity are split over the ranks, rank 0 scores and
    writes (the others return no paths)."""
    requests = job_requests(spec)
    if not requests:
        return []
    train = spec["train"]
    out_dir = Path(summary["out_dir"])
    runtime = runtime or runtime_of(TrainConfig.from_dict(train, source=f"job {spec.get('name')}"))
    store = ResultStore(results_dir)
    scale = run_scale(spec, summary, world)
    if "decode" not in spec:
        raise ConfigError(f"job {spec.get('name')}: its spec has no decoding settings (written by an older repro); "
                          "resubmit it")
    search = DecodeSettings.from_dict(spec["decode"], source=f"job {spec.get('name')}: field 'decode'")
    needs_model = any(r.measure in MODEL_MEASURES for r in requests)
    model, checkpoint, averaged_from, averaged = (_model(out_dir, int(train["average_last"]), runtime) if needs_model
                                                  else (None, None, (), ()))
    k = len(averaged_from)
    dataset = get_dataset(train["dataset"], resolve_data_dir(train.get("data_dir")))
    log.info("evaluating on %s", runtime.describe())
    common = dict(checkpoint=str(checkpoint) if checkpoint else None, checkpoints_averaged=k, run_dir=str(out_dir),
                  devices=world, steps=summary.get("steps"), job=spec["name"], device=str(runtime.device),
                  **runtime.precision.provenance())
    scaled = spec.get("scaled")
    name, scaled_extra = None, {}
    if scaled:   # one record per seed; the report draws no figure per run (out_dir, not run_dir)
        name = str(scaled["record"])
        common["out_dir"] = common.pop("run_dir")
        scaled_extra = {**{key: scaled[key] for key in ("scale", "signature", "row", "seed")},
                        "parameters": count_parameters(model) if model is not None else None,
                        "train_seconds": summary.get("elapsed_s")}
    trained = Trained(model, SharedVocab.load(out_dir / "vocab.json") if needs_model else None, dataset, runtime,
                      search, out_dir, checkpoints_averaged=k, summary=summary, devices=world,
                      files={"trees": out_dir / "test.parsed", "hypotheses": out_dir / f"hypotheses.{dataset.tgt_lang}"},
                      intervals=bool(scaled), checkpoint=checkpoint, averaged_from=averaged_from, averaged=averaged)
    written = []
    for request in requests:
        measured = measure(trained, request)
        if measured is not None and runtime.is_main:
            written.append(record(store, request, measured, config=train, decode=spec["decode"], scale=scale,
                                  provenance=common, extra=scaled_extra, name=name, run_dir=out_dir))
    if needs_model and not measures_dev(requests):   # the run's own dev evaluation: token accuracy for every job
        evaluate_dev(trained, config=train, decode=spec["decode"], scale=scale, provenance=common)
    return written
