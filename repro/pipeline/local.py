"""``repro reproduce --pipeline local``: the whole recipe of Sections 5 and 6.1 at laptop scale.

1. the local claims (equation-level checks of the implementation), recorded in the store;
2. training of the ``local`` recipe (:mod:`repro.recipes`) on Multi30k EN-DE, checkpointing;
3. the average of the recipe's last checkpoints (Section 6.1);
4. the measurement its claim ``local.multi30k.bleu`` names (``bleu.sacrebleu``, :mod:`repro.measures`):
   the recipe's search (beam 4, alpha 0.6, max length input + 50) on test_2016_flickr, scored
   with sacreBLEU (reported) and the paper's tokenized protocol (for information);
5. per-wordpiece perplexity on the validation set and the step time (measurements without a claim);
6. results for ``local.multi30k.bleu`` (the project's target, with sacreBLEU's bootstrap 95%
   interval), ``local.multi30k.ppl`` and ``local.multi30k.step-time`` (median seconds per step,
   with the spread of the logged steps) under ``RESULTS`` and a summary ``local_run.json`` beside
   it; run artifacts stay under ``runs/`` (not committed);
7. the report (``repro report``) from those results.

Every input (the data, the claims, the results store the report will read, the folders it writes)
is checked before anything is deleted or written. Every record it writes is named
``RESULTS/<claim>/reproduce-local.json`` and replaced in place on the next run; it deletes nothing
it did not write: ``--fresh`` deletes only what the run directory's manifest lists
(:mod:`repro.pipeline.run_dir`). The default layout is
``reports/local/results`` with the report in ``reports/``; ``--reports DIR`` puts the report in
DIR and the results in ``DIR/local/results``.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from repro.files.writer import atomic_write_text
from repro.audit.repro_adapter import ReproAdapter
from repro.checks import CHECKERS, run_checks, select_claims
from repro.claims.loader import known_values
from repro.claims.runner import count
from repro.data.corpora import Dataset, get_dataset, resolve_data_dir
from repro.data.vocab import SharedVocab
from repro.decode.translate import load_model
from repro.errors import ConfigError
from repro.manifest import Manifest
from repro.paths import existing_dir, output_dir
from repro.pipeline import run_dir
from repro.eval.translation import evaluate_perplexity
from repro.runtime import Runtime
from repro.model.transformer import Transformer
from repro.recipes import Recipe, get_recipe
from repro.report import FIGURE3_SENTENCE, generate
from repro.measures import (Measured, Request, Trained, claim_requests, combine_seeds, keep_in_run, measure, record,
                            result_of)
from repro.results import ResultStore, store_records
from repro.train.average import average_last, averaged_identities
from repro.train.checkpoint import list_checkpoints
from repro.train.data import dataset_for
from repro.train.lineage import ALLOW_FLAG, readable_lineage
from repro.train.loop import TrainSummary, runtime_of, train

BLEU_CLAIM = "local.multi30k.bleu"
PPL_CLAIM = "local.multi30k.ppl"
STEP_TIME = "local.multi30k.step-time"
TEST_SPLIT, DEV_SPLIT = "test", "dev"  # multi30k-en-de: test = test_2016_flickr, dev = val


def _say(msg: str) -> None:
    print(f"repro reproduce: {msg}", file=sys.stderr, flush=True)


@dataclass
class Stages:
    """Wall seconds of each stage of a pipeline, in order."""

    began: float = field(default_factory=time.monotonic)
    seconds: dict[str, float] = field(default_factory=dict)

    def timed(self, name: str, work: Callable[[], Any]) -> Any:
        start = time.monotonic()
        value = work()
        self.seconds[f"{name}_s"] = time.monotonic() - start
        return value

    @property
    def total(self) -> float:
        return time.monotonic() - self.began

    def rounded(self) -> dict[str, float]:
        return {k: round(v, 1) for k, v in self.seconds.items()}


#: The name of the records the local main job owns (``RESULTS/<claim>/reproduce-local.json``).
RECORD_NAME = "reproduce-local"


def run_local_checks(results_dir: Path, claims_dir: str | None = None,
                     say: Callable[[str], None] = _say) -> dict[str, Any]:
    """The local, equation-level claims against repro's own implementation (``repro check``)."""
    claims = [c for c in select_claims("local", claims_dir=claims_dir) if not CHECKERS[c.checker].reads_results]
    records = run_checks(claims, ReproAdapter(),
                         on_record=lambda r: say(f"  {r.status.value:14s} {r.claim.id} ({r.seconds:.1f} s)"))
    store_records(records, ResultStore(results_dir), RECORD_NAME)  # replaces this job's earlier records in place
    return {"status": "run", "counts": count(records), "failed": [r.claim.id for r in records if r.status.broken]}


def scale_description(recipe: Recipe, steps: int) -> str:
    m, t = recipe.model, recipe.train
    return (f"local: {torch.get_num_threads()}-thread CPU, Multi30k EN-DE (29k pairs), {steps} steps x "
            f"~{t.tokens_per_batch} tokens per side, d_model={m.d_model}, N={m.n_layers}, "
            f"d_ff={m.d_ff}, h={m.n_heads}, ~{t.vocab_size} shared BPE; "
            f"average of the last {t.average_last} checkpoints; not the paper's scale")


def _average(recipe: Recipe, out_dir: Path, allow_no_lineage: bool = False) -> tuple[Path, int]:
    """Section 6.1's average of the recipe's last k checkpoints (fewer only when the run was cut short)."""
    k = min(recipe.train.average_last, len(list_checkpoints(out_dir)))
    return average_last(out_dir, k, allow_no_lineage=allow_no_lineage), k


def job_requests(claims_dir: str | None = None) -> list[Request]:
    """What the main job measures: the measurement its claim names (``local.multi30k.bleu``), and the two
    it stores without a claim, which the report lists without a status."""
    return [*claim_requests([BLEU_CLAIM], claims_dir=claims_dir),
            Request(PPL_CLAIM, "perplexity.wordpiece", DEV_SPLIT), Request(STEP_TIME, "step-time.logged-median")]


#: The stage (``stages_s``) each measurement's time is counted in; a measurement not listed, its own name.
STAGES = {"bleu.sacrebleu": "decode", "bleu.tokenized-compound-split": "decode", "perplexity.wordpiece": "perplexity"}


@dataclass
class SeedRun:
    """One seed's training and evaluation (stages 2-5): what each request measured (None: nothing to store)."""

    seed: int
    out_dir: Path
    summary: TrainSummary
    averaged: Path
    averaged_k: int
    measured: dict[str, Measured | None]
    vocab_size: int


def _write_results(results_dir: Path, recipe: Recipe, runs: list[SeedRun], requests: list[Request],
                   common: dict[str, Any]) -> dict[str, Measured]:
    """Store each request's measurement (over the seeds that gave one), and each seed's own in its run
    directory (``evaluations/``); returns them by result id."""
    first = runs[0]
    scale = scale_description(recipe, first.summary.steps) + (f"; mean of {len(runs)} seeds" if len(runs) > 1 else "")
    store = ResultStore(results_dir)
    stored = {}
    for request in requests:
        by_seed = {r.seed: r.measured[request.result_id] for r in runs if r.measured[request.result_id] is not None}
        if not by_seed:  # e.g. fewer than two logged rows (a tiny smoke run) give no step time
            continue
        how = dict(config=recipe.train.to_dict(), decode=recipe.decode.to_dict(), scale=scale, provenance=common)
        for run in runs:
            if run.measured[request.result_id] is not None:
                keep_in_run(run.out_dir, result_of(request, run.measured[request.result_id], **how))
        stored[request.result_id] = combine_seeds(by_seed)
        record(store, request, stored[request.result_id], name=RECORD_NAME, **how)
    return stored


def _dev_perplexity(out_dir: Path, dataset: Dataset, runtime: Runtime) -> Callable[[Transformer, int], dict[str, float]]:
    """The training loop's checkpoint-time evaluation: perplexity and token accuracy on the dev split (the
    curve of the report)."""
    vocab: list[SharedVocab] = []  # built by the training run itself, so loaded at the first checkpoint

    def evaluate(model: Transformer, step: int) -> dict[str, float]:
        if not vocab:
            vocab.append(SharedVocab.load(out_dir / "vocab.json"))
        dev = evaluate_perplexity(model, vocab[0], dataset, DEV_SPLIT, runtime=runtime)
        return {"dev_ppl": round(dev.ppl, 3), "dev_accuracy": round(dev.accuracy, 5)}

    return evaluate


def _train_and_evaluate(recipe: Recipe, out_dir: Path, data_dir: str | None, stages: Stages,
                        say: Callable[[str], None], runtime: Runtime, requests: list[Request],
                        tag: str = "", allow_no_lineage: bool = False) -> SeedRun:
    """Stages 2-5 for one seed: train, average, then each of the job's measurements (:mod:`repro.measures`).
    ``allow_no_lineage``: resume from, average and evaluate checkpoints without a readable lineage
    (``--allow-no-lineage``); the checkpoints and the records say so."""
    say(f"2/5 {tag}training ({recipe.train.max_steps} steps) in {out_dir}, dev perplexity at every checkpoint")
    dataset = get_dataset(recipe.train.dataset, resolve_data_dir(data_dir))
    summary = stages.timed(f"{tag}train", lambda: train(recipe.train, runtime=runtime, recipe=recipe.to_dict(),
                                                        evaluate=_dev_perplexity(out_dir, dataset, runtime),
                                                        allow_no_lineage=allow_no_lineage))

    say(f"3/5 {tag}averaging the last {min(recipe.train.average_last, len(list_checkpoints(out_dir)))} checkpoints")
    averaged, k = stages.timed(f"{tag}average", lambda: _average(recipe, out_dir, allow_no_lineage))
    model, state = load_model(averaged, runtime=runtime, allow_no_lineage=allow_no_lineage)
    if readable_lineage(state) is None:   # only with --allow-no-lineage: the records say so
        unchecked = ", ".join(state.get("lineage_unchecked") or ()) or "checkpoints"
        summary.extra["lineage"] = "; ".join(filter(None, (
            summary.extra.get("lineage"), f"{averaged.name} averages {unchecked} without a readable lineage "
                                          f"({ALLOW_FLAG}): their vocabulary and training data are not checked")))
    vocab = SharedVocab.load(out_dir / "vocab.json")
    trained = Trained(model, vocab, dataset, runtime, recipe.decode, out_dir, checkpoints_averaged=k,
                      summary=summary.to_dict(), files={"hypotheses": out_dir / "test_2016_flickr.hyp.de"},
                      checkpoint=averaged, averaged_from=tuple(state.get("averaged_from") or ()),
                      averaged=averaged_identities(state, averaged))
    d = recipe.decode
    measured: dict[str, Measured | None] = {}
    for n, request in enumerate(requests, 4):
        on = f" on the {request.split} split" if request.split else ""
        say(f"{min(n, 5)}/5 {tag}{request.result_id}: {request.measure}{on}"
            + (f" (beam {d.beam_size}, alpha {d.alpha}, max length input + {d.max_len_offset})"
               if request.measure.startswith("bleu.") else ""))
        found = stages.timed(f"{tag}{STAGES.get(request.measure, request.measure)}",
                             lambda request=request: measure(trained, request))
        measured[request.result_id] = found
        if found is not None:
            interval = f", 95% interval [{found.ci95[0]:.{found.digits}f}, {found.ci95[1]:.{found.digits}f}]" \
                if found.ci95 else ""
            say(f"    {found.value} {found.unit}{interval}")
    return SeedRun(recipe.train.seed, out_dir, summary, averaged, k, measured, len(vocab))


def check_inputs(recipe: Recipe, out_dir: Path, output_dirs: list[Path], results_dir: Path,
                 claims_dir: str | None, fresh_resumed: tuple[str, ...] | None) -> Manifest:
    """What the main job reads and writes, checked before anything is deleted or written: the data
    set's three splits, the claims, the records the report will read with them, the folders it
    writes, and (``--fresh``: the patterns a run resumes from) what ``--fresh`` would leave."""
    existing_dir(resolve_data_dir(recipe.train.data_dir), "data directory (--data-dir)")
    dataset = dataset_for(recipe.train)
    for split in ("train", DEV_SPLIT, TEST_SPLIT):
        dataset.split(split)
    select_claims(claims_dir=claims_dir)  # the claims the checks and the report read, checkers included
    run_dir.check_writable(out_dir)
    for folder in output_dirs:
        output_dir(folder, "reports directory (--reports)")
    if results_dir.exists():
        ResultStore(results_dir, expected=known_values(claims_dir)).read_all()
    return run_dir.check_fresh(out_dir, fresh_resumed) if fresh_resumed is not None else Manifest.load(out_dir)


def reproduce_local(
    *,
    out_dir: str | Path = "runs/local",
    reports_dir: str | Path = "reports/local",
    data_dir: str | None = None,
    fresh: bool = False,
    checks: bool = True,
    overrides: dict[str, Any] | None = None,
    write_report: bool = True,
    claims_dir: str | None = None,
    say: Callable[[str], None] = _say,
    report_dir: str | Path | None = None,
    seeds: int = 1,
    allow_no_lineage: bool = False,
) -> dict[str, Any]:
    """Run the stages above; returns the summary it writes to ``REPORTS/local_run.json``. The report
    goes to ``report_dir`` (default: the parent of ``reports_dir``); ``seeds`` > 1 trains that many
    seeds, each in ``OUT_DIR/seed-S``, and stores their mean with its interval (:mod:`repro.eval.seeds`)."""
    if seeds < 1:
        raise ConfigError(f"seeds must be positive, got {seeds}")
    stages = Stages()
    out_dir, reports_dir = Path(out_dir), Path(reports_dir)
    results_dir = reports_dir / "results"
    report_dir = Path(report_dir) if report_dir is not None else reports_dir.parent
    recipe = get_recipe("local").replace(out_dir=str(out_dir), data_dir=data_dir, **(overrides or {}))
    layout = run_dir.LOCAL if seeds == 1 else run_dir.under("seed-*", run_dir.LOCAL)
    resumed = run_dir.RESUMED_FROM if seeds == 1 else run_dir.under("seed-*", run_dir.RESUMED_FROM)[1:]
    # every input before anything is deleted or written
    manifest = check_inputs(recipe, out_dir, [reports_dir, report_dir], results_dir, claims_dir,
                            resumed if fresh else None)
    run_dir.start_run(out_dir, layout, manifest, fresh=fresh)

    check_summary: dict[str, Any] = {"status": "skipped"}
    if checks:
        say("1/5 local claims")
        check_summary = stages.timed("checks", lambda: run_local_checks(results_dir, claims_dir, say))

    runtime = runtime_of(recipe.train)
    requests = job_requests(claims_dir)
    say(f"    training and decoding on {runtime.describe()}")
    if seeds == 1:
        runs = [_train_and_evaluate(recipe, out_dir, data_dir, stages, say, runtime, requests,
                                    allow_no_lineage=allow_no_lineage)]
    else:
        base = recipe.train.seed
        runs = []
        for seed in range(base, base + seeds):
            seed_dir = out_dir / f"seed-{seed}"
            seeded = recipe.replace(seed=seed, out_dir=str(seed_dir))
            runs.append(_train_and_evaluate(seeded, seed_dir, data_dir, stages, say, runtime, requests,
                                            f"seed {seed}: ", allow_no_lineage))
    total = stages.total
    first = runs[0]
    summary = first.summary
    say(f"    total {total / 60:.1f} min")

    common = dict(
        steps=summary.steps, resumed_from=summary.resumed_from, train_tokens_per_s=round(summary.tokens_per_s, 1),
        wall_minutes_total=round(total / 60, 2), stages_s=stages.rounded(),
        checkpoint=str(first.averaged), checkpoints_averaged=first.averaged_k,
        filtered_train_pairs=summary.extra.get("filtered"), vocab_size=first.vocab_size,
        threads=torch.get_num_threads(), run_dir=str(out_dir), seeds=[r.seed for r in runs],
        **runtime.provenance(),
        **({"lineage": "; ".join(r.summary.extra["lineage"] for r in runs if "lineage" in r.summary.extra)}
           if any("lineage" in r.summary.extra for r in runs) else {}),
    )
    stored = _write_results(results_dir, recipe, runs, requests, common)
    bleu = stored[BLEU_CLAIM]
    evaluations = {r.seed: r.measured[BLEU_CLAIM].raw for r in runs}   # the BLEU evaluation of each seed
    report = {
        "profile": "local", "claims_written": list(stored), "checks": check_summary,
        # the claim's measurement (sacreBLEU) over the seeds, with its interval (one seed: sacreBLEU's
        # bootstrap; several: the seeds', repro.eval.seeds)
        "sacrebleu": bleu.value, "sacrebleu_signature": evaluations[first.seed].sacrebleu.signature,
        "sacrebleu_ci95": [round(x, 2) for x in bleu.ci95] if bleu.ci95 else None,
        "sacrebleu_by_seed": {str(seed): round(e.sacrebleu.score, 2) for seed, e in evaluations.items()},
        "paper_protocol_bleu": round(sum(e.paper.score for e in evaluations.values()) / len(runs), 2),
        "dev_ppl": stored[PPL_CLAIM].value if PPL_CLAIM in stored else None,
        "final_train_loss": summary.final_loss, "scale": scale_description(recipe, summary.steps),
        "config": recipe.train.to_dict(), **common,
    }
    atomic_write_text(reports_dir / "local_run.json", json.dumps(report, indent=2, default=str) + "\n")
    if write_report:
        say(f"report: {report_dir}/report.md, report.html, report.json")
        generate([results_dir], report_dir, claims_dir=claims_dir, run_dirs=[r.out_dir for r in runs],
                 attention_sentence=FIGURE3_SENTENCE)
    return report
