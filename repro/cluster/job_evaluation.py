"""After a job trains: measure the claims it serves on the trained model and store the results.

Which measurement a claim needs follows from its id:

- ``table2.bleu.*``: average of the job recipe's last k checkpoints (Section 6.1: 5 base, 20
  big; exactly k: a run with fewer is refused, never averaged over what there is), searched with the recipe's decoding settings (beam 4, alpha 0.6, input + 50), on the
  test split (newstest2014), scored with the paper's protocol (tokenized BLEU with compound
  splitting); sacreBLEU is kept beside it;
- ``table3.bleu.<row>`` / ``table3.ppl.<row>``: the recipe's checkpoint (``average_last`` 1: "no
  checkpoint averaging"), on the dev split (newstest2013): BLEU as above, perplexity per wordpiece;
- ``table3-<scale>.bleu.<row>`` / ``table3-<scale>.ppl.<row>``: the same on the scale's dev split for a
  job of Table 3 at a named scale (``repro submit table3 --scale``), the perplexity with a bootstrap
  over sentences too, the parameter count in ``extra``; stored as ``<claim>/seed-<S>-<signature>.json``
  (one record per seed, replaced in place) at scale ``<scale>: ...``, never ``cluster:``;
- ``table4.f1.*``: the parser recipe's search (Section 6.3: beam 21, alpha 0.3, input + 300),
  repaired trees scored by EVALB (COLLINS.prm) on the test split (WSJ section 23);
- ``sec5.step-time.*``: wall seconds per training step of this job, with the device count and
  a measured peak so the reporter can normalise it to 8 P100 (none stored when this run of the
  job made no update: a requeued job that resumed at its last step).

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

from repro.cluster.experiments import PLACEMENT_FIELDS
from repro.data.corpora import get_dataset, resolve_data_dir
from repro.data.vocab import SharedVocab
from repro.decode.settings import DecodeSettings
from repro.decode.translate import load_model, translate
from repro.errors import ConfigError
from repro.eval.bleu import paper_tokens
from repro.eval.bootstrap import evalb_interval, paper_interval, perplexity_interval
from repro.eval.sharding import main_first, map_sharded
from repro.eval.step_time_spread import spread_of_log
from repro.eval.translation import evaluate_bleu, evaluate_perplexity
from repro.model import count_parameters
from repro.runtime import Runtime
from repro.train.config import TrainConfig
from repro.train.loop import runtime_of
from repro.parsing.scoring import score_split
from repro.results import Result, ResultStore, collect_provenance
from repro.results.hardware import measure_peak_flops
from repro.train.average import average_last as average
from repro.train.checkpoint import list_checkpoints

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


def is_table3(claim: str) -> bool:
    """A claim of Table 3, at the paper's scale (``table3.*``) or a named one (``table3-<scale>.*``)."""
    head = claim.split(".")[0]
    return head == "table3" or head.startswith("table3-")


def _model(out_dir: Path, average_last: int, runtime: Runtime):
    """The model the claims are measured on: the average of exactly the last ``average_last``
    checkpoints (Section 6.1), on the runtime's device; fewer checkpoints is an error."""
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
    model, _ = load_model(path, runtime=runtime)
    return model.eval(), path, average_last


def evaluate_claims(spec: dict[str, Any], summary: dict[str, Any], world: int, results_dir: str | Path, *,
                    runtime: Runtime | None = None) -> list[Path]:
    """Measure each claim of ``spec`` that names a metric on ``runtime`` (default: the job config's
    device and precision); write one result per claim. Called on every rank of a job: the
    decoding and perplexity are split over the ranks, rank 0 scores and writes (the others
    return no paths)."""
    claims = [c for c in spec.get("claims", []) if c.split(".")[0] in ("table2", "table4", "sec5") or is_table3(c)]
    if not claims:
        return []
    train = spec["train"]
    out_dir = Path(summary["out_dir"])
    runtime = runtime or runtime_of(TrainConfig.from_dict(train, source=f"job {spec.get('name')}"))
    precision = runtime.precision
    store = ResultStore(results_dir)
    scale = run_scale(spec, summary, world)
    vocab = SharedVocab.load(out_dir / "vocab.json")
    if "decode" not in spec:
        raise ConfigError(f"job {spec.get('name')}: its spec has no decoding settings (written by an older repro); "
                          "resubmit it")
    search = DecodeSettings.from_dict(spec["decode"], source=f"job {spec.get('name')}: field 'decode'")
    model, checkpoint, k = _model(out_dir, int(train["average_last"]), runtime)
    dataset = get_dataset(train["dataset"], resolve_data_dir(train.get("data_dir")))
    log.info("evaluating on %s", runtime.describe())
    common = dict(checkpoint=str(checkpoint), checkpoints_averaged=k, run_dir=str(out_dir), devices=world,
                  steps=summary.get("steps"), job=spec["name"], device=str(runtime.device), **precision.provenance())
    scaled = spec.get("scaled")
    record, scaled_extra = None, {}
    if scaled:   # one record per seed; the report draws no figure per run (out_dir, not run_dir)
        record = str(scaled["record"])
        common["out_dir"] = common.pop("run_dir")
        scaled_extra = {**{k: scaled[k] for k in ("scale", "signature", "row", "seed")},
                        "parameters": count_parameters(model), "train_seconds": summary.get("elapsed_s")}
    written = []

    def write(claim: str, value: Any, unit: str, detail: str, data: str, signature: str | None = None,
              ci95: tuple[float, float] | None = None, **extra: Any) -> None:
        if not runtime.is_main:
            return
        prov = collect_provenance(config=train, dataset=data, scale=scale, bleu_signature=signature, **common, **extra)
        interval = tuple(round(x, 4) for x in ci95) if ci95 is not None else None
        written.append(store.write(Result(claim, value, prov, unit=unit, detail=detail, ci95=interval,
                                          extra=dict(scaled_extra)), record))
        log.info("%s = %s (%s)", claim, value, scale)

    for claim in claims:
        kind = claim.split(".")[1]
        if claim.startswith("table2.bleu") or (is_table3(claim) and kind == "bleu"):
            split = "test" if claim.startswith("table2") else "dev"
            bleu = evaluate_bleu(model, vocab, dataset, split, search, runtime=runtime)
            if not runtime.is_main:
                continue
            interval = paper_interval(paper_tokens(bleu.hypotheses, lang=dataset.tgt_lang),
                                      paper_tokens(bleu.references, lang=dataset.tgt_lang, tokenized=dataset.tokenized))
            write(claim, round(bleu.paper.score, 2), "BLEU (tokenized, compound splitting)",
                  f"beam {search.beam_size}, alpha {search.alpha}, input + {search.max_len_offset} on {dataset.name} "
                  f"{split}, {k} checkpoint(s) averaged; "
                  f"sacreBLEU {bleu.sacrebleu.score:.2f} ({bleu.sacrebleu.signature})",
                  f"{dataset.name} {split} ({bleu.sentences} pairs)", bleu.paper.signature, interval.ci95,
                  sacrebleu=round(bleu.sacrebleu.score, 2), sacrebleu_signature=bleu.sacrebleu.signature,
                  bootstrap=interval.to_dict())
        elif kind == "ppl":
            ppl = evaluate_perplexity(model, vocab, dataset, "dev", runtime=runtime, per_sentence=bool(scaled))
            interval = perplexity_interval(ppl.sentences) if scaled and runtime.is_main else None
            write(claim, round(ppl.ppl, 3), "PPL per wordpiece (dev)",
                  f"exp(mean NLL) over {ppl.tokens} wordpieces of {dataset.name} dev, {k} checkpoint(s) averaged"
                  + ("; 95% interval: bootstrap over sentences" if interval else ""),
                  f"{dataset.name} dev", None, interval.ci95 if interval else None,
                  **({"bootstrap": interval.to_dict()} if interval else {}))
        elif claim.startswith("table4.f1"):
            src, _ = dataset.split("test")
            sentences = Path(src).read_text(encoding="utf-8").splitlines()
            outputs = map_sharded(lambda part: translate(model, vocab, part, search, runtime=runtime), sentences,
                                  runtime)
            if not runtime.is_main:
                continue
            # the gold trees lie beside the prepared test split (repro.parsing.prepare)
            parsed = score_split(outputs, Path(src).parent, "test", write_trees=out_dir / "test.parsed")
            write(claim, round(parsed.f1, 2), "F1 (EVALB, COLLINS.prm)",
                  f"beam {search.beam_size}, alpha {search.alpha}, input + {search.max_len_offset}; "
                  f"{parsed.repaired} of {parsed.sentences} outputs repaired",
                  f"{dataset.name} test ({parsed.sentences} trees)", None, evalb_interval(parsed.evalb.rows).ci95)
        elif claim.startswith("sec5.step-time") and runtime.is_main:
            steps = int(summary.get("steps", 0)) - int(summary.get("resumed_from", 0))
            if steps <= 0:
                log.warning("%s: not stored: this run of the job made no update (it resumed at step %s)",
                            claim, summary.get("resumed_from"))
                continue
            seconds = float(summary.get("elapsed_s", 0.0)) / steps
            step = spread_of_log(out_dir / "metrics.csv")
            write(claim, round(seconds, 4), "s/step on the job's hardware",
                  f"{steps} steps in {summary.get('elapsed_s', 0):.0f} s on {world} device(s)"
                  + (f"; logged intervals: median {step.median:.4f} s, quartiles {step.q1:.4f}-{step.q3:.4f} s"
                     if step else ""),
                  str(train["dataset"]), None, step.ci95 if step else None, peak_flops=measure_peak_flops(runtime.device),
                  **({"spread": step.to_dict()} if step else {}))
    return written
