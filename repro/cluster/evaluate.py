"""After a job trains: measure the claims it serves on the trained model and store the results.

Which measurement a claim needs follows from its id:

- ``table2.bleu.*``: average of the job recipe's last k checkpoints (Section 6.1: 5 base, 20
  big; exactly k: a run with fewer is refused, never averaged over what there is), searched with the recipe's decoding settings (beam 4, alpha 0.6, input + 50), on the
  test split (newstest2014), scored with the paper's protocol (tokenized BLEU with compound
  splitting); sacreBLEU is kept beside it;
- ``table3.bleu.<row>`` / ``table3.ppl.<row>``: the recipe's checkpoint (``average_last`` 1: "no
  checkpoint averaging"), on the dev split (newstest2013): BLEU as above, perplexity per wordpiece;
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

from repro.data.registry import get_dataset, resolve_data_dir
from repro.data.vocab import SharedVocab
from repro.decode.settings import DecodeSettings
from repro.decode.translate import load_model, translate
from repro.errors import ConfigError
from repro.eval.bleu import paper_tokens
from repro.eval.bootstrap import evalb_interval, paper_interval
from repro.eval.steptime import spread_of_log
from repro.eval.translation import evaluate_bleu, evaluate_perplexity
from repro.runtime import Runtime
from repro.train.config import TrainConfig
from repro.train.loop import runtime_of
from repro.parsing.evaluate import score_split
from repro.results import Result, ResultStore, collect_provenance
from repro.results.hardware import measure_peak_flops
from repro.train.average import average_last as average
from repro.train.checkpoint import list_checkpoints

log = logging.getLogger("repro.cluster.evaluate")


def run_scale(spec: dict[str, Any], summary: dict[str, Any], world: int) -> str:
    """``cluster: ...`` for the paper's recipe run to its end, ``reduced: ...`` otherwise."""
    train = spec["train"]
    full = not spec.get("overrides") and summary.get("steps", 0) >= train["max_steps"]
    kind = "cluster" if full else "reduced"
    why = "" if full else f" (changed: {', '.join(sorted(spec.get('overrides') or {})) or 'stopped early'})"
    return (f"{kind}: profile {spec.get('profile')}, {world} process(es), {summary.get('steps')} steps x "
            f"{train['tokens_per_batch']} tokens per side per update, preset {spec['preset']}{why}")


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
    path = average(out_dir, average_last) if average_last > 1 else checkpoints[-1]
    model, _ = load_model(path, runtime=runtime)
    return model.eval(), path, average_last


def evaluate_claims(spec: dict[str, Any], summary: dict[str, Any], world: int, results_dir: str | Path, *,
                    runtime: Runtime | None = None) -> list[Path]:
    """Measure each claim of ``spec`` that names a metric on ``runtime`` (default: the job config's
    device and precision); write one result per claim."""
    claims = [c for c in spec.get("claims", []) if c.split(".")[0] in ("table2", "table3", "table4", "sec5")]
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
    search = DecodeSettings(**spec["decode"])
    model, checkpoint, k = _model(out_dir, int(train["average_last"]), runtime)
    dataset = get_dataset(train["dataset"], resolve_data_dir(train.get("data_dir")))
    log.info("evaluating on %s", runtime.describe())
    common = dict(checkpoint=str(checkpoint), checkpoints_averaged=k, run_dir=str(out_dir), devices=world,
                  steps=summary.get("steps"), job=spec["name"], device=str(runtime.device), **precision.provenance())
    written = []

    def write(claim: str, value: Any, unit: str, detail: str, data: str, signature: str | None = None,
              ci95: tuple[float, float] | None = None, **extra: Any) -> None:
        prov = collect_provenance(config=train, dataset=data, scale=scale, bleu_signature=signature, **common, **extra)
        interval = tuple(round(x, 4) for x in ci95) if ci95 is not None else None
        written.append(store.write(Result(claim, value, prov, unit=unit, detail=detail, ci95=interval)))
        log.info("%s = %s (%s)", claim, value, scale)

    for claim in claims:
        kind = claim.split(".")[1]
        if claim.startswith(("table2.bleu", "table3.bleu")):
            split = "test" if claim.startswith("table2") else "dev"
            bleu = evaluate_bleu(model, vocab, dataset, split, search, max_tokens=8000, runtime=runtime)
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
            ppl = evaluate_perplexity(model, vocab, dataset, "dev", runtime=runtime)
            write(claim, round(ppl.ppl, 3), "PPL per wordpiece (dev)",
                  f"exp(mean NLL) over {ppl.tokens} wordpieces of {dataset.name} dev, {k} checkpoint(s) averaged",
                  f"{dataset.name} dev")
        elif claim.startswith("table4.f1"):
            src, _ = dataset.split("test")
            sentences = Path(src).read_text(encoding="utf-8").splitlines()
            outputs = translate(model, vocab, sentences, search, runtime=runtime)
            # the gold trees lie beside the prepared test split (repro.parsing.prepare)
            parsed = score_split(outputs, Path(src).parent, "test", write_trees=out_dir / "test.parsed")
            write(claim, round(parsed.f1, 2), "F1 (EVALB, COLLINS.prm)",
                  f"beam {search.beam_size}, alpha {search.alpha}, input + {search.max_len_offset}; "
                  f"{parsed.repaired} of {parsed.sentences} outputs repaired",
                  f"{dataset.name} test ({parsed.sentences} trees)", None, evalb_interval(parsed.evalb.rows).ci95)
        elif claim.startswith("sec5.step-time"):
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
