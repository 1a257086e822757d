"""``repro reproduce --pipeline local-parsing``: Section 6.3's constituency parser at laptop scale.

1. the NLTK Penn Treebank sample prepared as sentence / linearised-tree pairs, split by file
   (:mod:`repro.parsing.prepare`: 3396 training trees from WSJ 00-01, 245 test trees);
2. training of the ``local-parsing`` recipe (:mod:`repro.recipes`: the 4-layer parser of
   Section 6.3 shrunk to d_model 128);
3. the recipe's search on the test split, Section 6.3's: beam 21, alpha 0.3, maximum output
   length input + 300 (the last checkpoint: the paper does not average for 6.3), and greedy
   search on the same checkpoint beside it;
4. EVALB (COLLINS.prm) on the repaired outputs: the measurement ``f1.evalb`` (:mod:`repro.measures`),
   the one the cluster's Table 4 jobs take;
5. a result ``local.ptb-sample.f1`` under ``REPORTS/results`` and a summary
   ``REPORTS/local_parsing_run.json``; run artifacts stay under ``runs/`` (not committed).

The F1 measures the pipeline, not Table 4: the training set is about a tenth of WSJ 02-21 and
the test files are not section 23. There is no claim for it; the report lists it under
"Measurements without a claim". Earlier records of the id are replaced, never edited.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from repro.files import reader
from repro.data.text_lines import read_lines
from repro.files.writer import atomic_write_text
from repro.data.corpus import read_parallel
from repro.data.corpora import get_dataset, resolve_data_dir
from repro.data.vocab import SharedVocab
from repro.decode.settings import DecodeSettings
from repro.decode.translate import load_model, translate_ids
from repro.eval.perplexity import perplexity
from repro.model import Transformer
from repro.errors import ConfigError
from repro.model.precision import Precision
from repro.runtime import Runtime
from repro.parsing.scoring import ParseScore, score_outputs, vocabulary_ceiling
from repro.parsing.prepare import SplitInfo, gold_trees_file, prepare_ptb_sample, sample_groups
from repro.paths import output_dir
from repro.pipeline import run_dir
from repro.parsing.alignment import leaf_attention
from repro.parsing.symbol_accuracy import symbol_accuracy
from repro.pipeline.local import Stages
from repro.pipeline.parsing_recipe import RECIPE, on_prepared_data
from repro.pipeline.parsing_sanity import Overfit, overfit_parser, training_texts
from repro.recipes import Recipe, get_recipe
from repro.measures import Request, Trained, measure, record
from repro.results import ResultStore
from repro.train.average import averaged_identities
from repro.train.checkpoint import list_checkpoints
from repro.train.data import encode_pairs
from repro.train.lineage import ALLOW_FLAG, readable_lineage
from repro.train.loop import runtime_of, train

#: The name of the record this job owns (``RESULTS/local.ptb-sample.f1/reproduce-local-parsing.json``).
RECORD_NAME = "reproduce-local-parsing"

RESULT_ID = "local.ptb-sample.f1"
TEST_SPLIT = "test"
#: What the job measures (:mod:`repro.measures`): Table 4's F1, stored without a claim (the sample is not WSJ 23).
REQUEST = Request(RESULT_ID, "f1.evalb", TEST_SPLIT)
#: The sanity run's size (:mod:`repro.pipeline.parsing_sanity`).
OVERFIT_TREES = 10
#: How the scale line names the recipe's target units (``Recipe.targets``).
UNITS = {"symbols": "one target token per tree symbol (Vinyals & Kaiser et al.)",
         "per-word": "per-word target tokens (the same linearised tree, one token per word)"}
#: Training pairs the checkpoint probe scores beside the dev split (the PTB sample's dev split has 273).
TRAIN_PROBE_PAIRS = 273


def _say(msg: str) -> None:
    print(f"repro reproduce: {msg}", file=sys.stderr, flush=True)


def scale_description(recipe: Recipe, steps: int, train_trees: int, test_note: str, vocab_size: int) -> str:
    m, t = recipe.model, recipe.train
    vocab = (f"a word-level vocabulary of {vocab_size} tokens" if t.bpe_split == "word-level" else
             f"a shared BPE of {vocab_size} tokens")
    return (f"local: {torch.get_num_threads()}-thread CPU, NLTK Penn Treebank sample ({train_trees} training trees "
            f"from WSJ 00-01, files wsj_0001-0159; vs ~40K of WSJ 02-21), test {test_note} (not section 23); "
            f"{steps} steps x ~{t.tokens_per_batch} tokens per side, d_model={m.d_model}, N={m.n_layers}, "
            f"d_ff={m.d_ff}, h={m.n_heads}, {vocab}, {UNITS[recipe.targets]}; not the paper's scale, "
            f"not comparable with Table 4")


def epochs_seen(recipe: Recipe, steps: int, train_tgt: Path) -> float:
    """Passes over the training targets that ``steps`` updates of the recipe's tokens make (EOS counted)."""
    tokens = sum(len(line.split()) + 1 for line in read_lines(train_tgt))
    return round(steps * recipe.train.tokens_per_batch / max(tokens, 1), 1)


def decode_parses(model: torch.nn.Module, vocab: SharedVocab, sentences: Sequence[str], settings: DecodeSettings, *,
                  greedy: bool = False, max_tokens: int | None = None,
                  precision: Precision | None = None) -> tuple[list[str], int]:
    """Linearised trees for ``sentences`` and how many of them ran into the input + offset limit."""
    sources = vocab.encode_batch([s.strip() for s in sentences])
    ids = translate_ids(model, sources, settings, greedy=greedy, max_tokens=max_tokens, precision=precision)
    at_limit = sum(len(out) >= len(src) + settings.max_len_offset for src, out in zip(sources, ids))
    return [vocab.decode(out) for out in ids], at_limit


class ParserProbe:
    """The training loop's checkpoint-time evaluation of the parser: is it under- or over-fitting?

    At every checkpoint, in eval mode: the NLL per target token (no label smoothing, EOS counted) on
    the first :data:`TRAIN_PROBE_PAIRS` training pairs and on the dev split, the dev split's
    teacher-forced accuracy per kind of symbol (:mod:`repro.parsing.symbol_accuracy`), the share of
    leaves whose encoder-decoder attention is on their own word (:mod:`repro.parsing.alignment`), and greedy
    search on the dev sentences scored with EVALB (F1, and how many outputs have one leaf per word). A training NLL
    well below the dev NLL says the model over-fits; both high, that it under-fits. The points are
    kept in ``OUT_DIR/probe.json`` (a resumed run drops the points after its checkpoint), and the
    dev perplexity goes to ``metrics.csv`` as the translation job's does.
    """

    def __init__(self, out_dir: Path, prepared: Path, settings: DecodeSettings, *,
                 precision: Precision | None = None, train_pairs: int = TRAIN_PROBE_PAIRS) -> None:
        self.out_dir, self.prepared, self.settings, self.precision = out_dir, prepared, settings, precision
        self.train_pairs = train_pairs
        self.path = out_dir / "probe.json"
        self._data: tuple | None = None  # the vocabulary is the training run's: loaded at the first checkpoint

    @property
    def points(self) -> list[dict[str, Any]]:
        return reader.read_json(self.path, "probe log", error=ConfigError, allow_nan=True) if self.path.exists() else []

    def _load(self) -> tuple:
        if self._data is None:
            vocab = SharedVocab.load(self.out_dir / "vocab.json")
            dev = read_parallel(self.prepared / "dev.src", self.prepared / "dev.tgt").pairs
            seen = read_parallel(self.prepared / "train.src", self.prepared / "train.tgt").pairs[:self.train_pairs]
            self._data = (vocab, encode_pairs(vocab, seen)[0], encode_pairs(vocab, dev)[0], [src for src, _ in dev])
        return self._data

    def __call__(self, model: Transformer, step: int) -> dict[str, float]:
        vocab, seen, dev, dev_sentences = self._load()
        dev_ppl = perplexity(model, dev, precision=self.precision)
        train_ppl = perplexity(model, seen, precision=self.precision)
        outputs, _ = decode_parses(model, vocab, dev_sentences, self.settings, greedy=True, precision=self.precision)
        score = score_outputs(outputs, gold_trees_file(self.prepared, "dev"))
        point = {"step": step, "train_nll": round(train_ppl.nll_per_token, 4), "dev_nll": round(dev_ppl.nll_per_token, 4),
                 "dev_greedy_f1": round(score.f1, 2), "dev_exact_leaf_count": score.leaf_count["exact"],
                 "dev_sentences": len(dev_sentences), "dev_symbol_accuracy": symbol_accuracy(model, vocab, dev),
                 "dev_leaf_attention": leaf_attention(model, vocab, dev)}
        points = [p for p in self.points if p["step"] < step] + [point]
        atomic_write_text(self.path, json.dumps(points, indent=1) + "\n")
        return {"dev_ppl": round(math.exp(dev_ppl.nll_per_token), 3), "dev_accuracy": round(dev_ppl.accuracy, 5)}


def load_test_split(prepared: Path, out_dir: Path, test_limit: int | None) -> tuple[list[str], Path, str, int]:
    """The test sentences, their gold trees (the first ``test_limit`` with a limit), a note saying
    which, and how many test sentences there are in all."""
    sentences = read_lines(prepared / f"{TEST_SPLIT}.src")
    gold_path = gold_trees_file(prepared, TEST_SPLIT)
    total = len(sentences)
    if test_limit is not None and test_limit < total:
        sentences = sentences[:test_limit]
        gold_lines = read_lines(gold_path)[:test_limit]
        gold_path = out_dir / f"{TEST_SPLIT}.first{test_limit}.trees"
        atomic_write_text(gold_path, "".join(line + "\n" for line in gold_lines))
    note = (f"all {total} trees of files wsj_0180-0199" if len(sentences) == total else
            f"the first {len(sentences)} of {total} trees of files wsj_0180-0199 (--test-limit)")
    return sentences, gold_path, note, total


def _scores(parse: ParseScore, greedy: ParseScore, at_limit: int, greedy_at_limit: int,
            settings: DecodeSettings) -> dict[str, Any]:
    ev = parse.evalb.all
    return {"f1": round(parse.f1, 2), "precision": round(ev.precision, 2), "recall": round(ev.recall, 2),
            "repaired": parse.repaired, "at_length_limit": at_limit, "complete_match": round(ev.complete_match, 2),
            "leaf_count": parse.leaf_count, "leaf_count_by_length": parse.leaf_count_by_length,
            "decode": settings.to_dict(),
            "greedy": {"f1": round(greedy.f1, 2), "precision": round(greedy.evalb.all.precision, 2),
                       "recall": round(greedy.evalb.all.recall, 2), "repaired": greedy.repaired,
                       "leaf_count": greedy.leaf_count, "leaf_count_by_length": greedy.leaf_count_by_length,
                       "at_length_limit": greedy_at_limit}}


def reproduce_parsing_local(
    *,
    out_dir: str | Path = "runs/local-parsing",
    reports_dir: str | Path = "reports/local",
    data_dir: str | None = None,
    fresh: bool = False,
    overrides: dict[str, Any] | None = None,
    test_limit: int | None = None,
    say: Callable[[str], None] = _say,
    allow_no_lineage: bool = False,
) -> dict[str, Any]:
    """Prepare, train, decode and score the local parser; returns the summary it writes.
    ``allow_no_lineage``: resume from and decode checkpoints without a readable lineage."""
    if test_limit is not None and test_limit < 1:
        raise ConfigError(f"--test-limit must be positive, got {test_limit}")
    stages = Stages()
    out_dir, reports_dir = Path(out_dir), Path(reports_dir)
    results_dir = reports_dir / "results"
    recipe = get_recipe(RECIPE).replace(out_dir=str(out_dir), **(overrides or {}))
    # every input before anything is deleted or written (the treebank sample, the folders, --fresh)
    sample_groups(resolve_data_dir(data_dir))
    run_dir.check_writable(out_dir)
    run_dir.check_writable(out_dir / "overfit", "sanity run directory")
    output_dir(reports_dir, "reports directory (--reports)")
    resumed = (*run_dir.RESUMED_FROM, *(f"overfit/{p}" for p in run_dir.RESUMED_FROM))
    manifest = run_dir.check_fresh(out_dir, resumed) if fresh else None
    run_dir.start_run(out_dir, run_dir.PARSING, manifest, fresh=fresh)

    prepared = out_dir / "data"
    say(f"1/4 preparing the PTB sample in {prepared}")
    infos: dict[str, SplitInfo] = stages.timed("prepare", lambda: prepare_ptb_sample(resolve_data_dir(data_dir), prepared,
                                                                                           recipe.targets, within=out_dir))
    recipe = on_prepared_data(recipe, prepared)

    say(f"    sanity run: overfitting the first {OVERFIT_TREES} training trees (greedy F1 must reach 90)")
    texts = training_texts(prepared)
    overfit: Overfit = stages.timed("overfit", lambda: overfit_parser(
        recipe, prepared, out_dir / "overfit", trees=OVERFIT_TREES, vocab_texts=texts))
    say(f"    overfit: {overfit.trees} trees, {overfit.epochs:.0f} epochs, greedy F1 {overfit.f1:.2f}")

    settings = recipe.decode
    runtime = runtime_of(recipe.train)
    precision = runtime.precision
    probe = ParserProbe(out_dir, prepared, settings, precision=precision)
    say(f"2/4 training {RECIPE} ({recipe.train.max_steps} steps) in {out_dir}; at every checkpoint train and dev "
        f"NLL, greedy dev F1")
    summary = stages.timed("train", lambda: train(recipe.train, runtime=runtime, evaluate=probe,
                                                      recipe=recipe.to_dict(), allow_no_lineage=allow_no_lineage))

    checkpoint = list_checkpoints(out_dir)[-1]
    model, state = load_model(checkpoint, runtime=runtime, allow_no_lineage=allow_no_lineage)
    vocab = SharedVocab.load(out_dir / "vocab.json")
    say(f"    decoding on {runtime.describe()}")
    sentences, gold_path, test_note, total_test = load_test_split(prepared, out_dir, test_limit)
    say(f"3/4 beam search on {len(sentences)} test sentences (beam {settings.beam_size}, alpha {settings.alpha}, "
        f"max length input + {settings.max_len_offset}), then EVALB (COLLINS.prm): {REQUEST.measure}")
    trained = Trained(model, vocab, get_dataset(str(prepared)), runtime, settings, out_dir, summary=summary.to_dict(),
                      files={"outputs": out_dir / f"{TEST_SPLIT}.out", "trees": out_dir / f"{TEST_SPLIT}.parsed.trees"},
                      limit=test_limit, checkpoint=checkpoint, averaged_from=(checkpoint.name,),
                      averaged=averaged_identities(state, checkpoint))
    measured = measure(trained, REQUEST)
    stages.seconds.update({"decode_s": measured.seconds["decode"], "score_s": measured.seconds["score"]})
    parse, at_limit = measured.raw, measured.extra["at_length_limit"]
    # Greedy search on the same checkpoint, reported beside the paper's beam: over a weak model a
    # wide beam with a mild length penalty prefers short outputs, and the gap shows how much.
    say("4/4 greedy search on the same checkpoint, scored the same way")
    greedy_outputs, greedy_at_limit = stages.timed(
        "greedy_decode", lambda: decode_parses(model, vocab, sentences, settings, greedy=True,
                                                   precision=precision))
    atomic_write_text(out_dir / f"{TEST_SPLIT}.greedy.out", "".join(o + "\n" for o in greedy_outputs))
    greedy = score_outputs(greedy_outputs, gold_path)
    total = stages.total
    ev = parse.evalb.all
    say(f"    F1 {parse.f1:.2f} (P {ev.precision:.2f}, R {ev.recall:.2f}); {parse.repaired} of {parse.sentences} "
        f"outputs repaired ({parse.leaf_count['too_few']} with too few XX, {parse.leaf_count['too_many']} with too "
        f"many), {at_limit} at the length limit; greedy search: F1 {greedy.f1:.2f}, {greedy.repaired} "
        f"repaired; total {total / 60:.1f} min")

    scale = scale_description(recipe, summary.steps, infos["train"].sentences, test_note, len(vocab))
    common = dict(
        steps=summary.steps, epochs=epochs_seen(recipe, summary.steps, prepared / "train.tgt"),
        resumed_from=summary.resumed_from, train_tokens_per_s=round(summary.tokens_per_s, 1),
        final_train_loss=summary.final_loss, wall_minutes_total=round(total / 60, 2),
        stages_s=stages.rounded(), checkpoint=str(checkpoint),
        vocab_size=len(vocab), threads=torch.get_num_threads(), run_dir=str(out_dir),
        test_sentences=parse.sentences, test_sentences_available=total_test, overfit=overfit.to_dict(),
        vocabulary_ceiling=vocabulary_ceiling(vocab, prepared, TEST_SPLIT),
        **({"lineage": summary.extra.get("lineage") or f"{checkpoint.name} has no readable lineage ({ALLOW_FLAG})"}
           if "lineage" in summary.extra or readable_lineage(state) is None else {}),
    )
    scores = {**_scores(parse, greedy, at_limit, greedy_at_limit, settings), "curve": probe.points}
    measured = dataclasses.replace(
        measured, dataset=f"ptb-nltk-sample test: {test_note}",
        detail=(f"{measured.detail}; the last checkpoint, no averaging; decoding took "
                f"{stages.seconds['decode_s']:.0f} s. Greedy search on the same checkpoint: F1 {greedy.f1:.2f} "
                f"({greedy.repaired} repaired)"))
    record(ResultStore(results_dir), REQUEST, measured, config=recipe.train.to_dict(), decode=recipe.decode.to_dict(),
           scale=scale, provenance={"recipe": recipe.to_dict(), **precision.provenance(), **common},
           extra={"greedy": scores["greedy"], "curve": scores["curve"]}, name=RECORD_NAME, run_dir=out_dir)
    report = {"profile": "local-parsing", "result_written": RESULT_ID, "recipe": RECIPE, "experiment": RECIPE,
              "targets": recipe.targets, **scores,
              "scale": scale, "splits": {k: v.sentences for k, v in infos.items()}, "config": recipe.train.to_dict(),
              "evalb": parse.evalb.to_dict(), "numeric_precision": precision.provenance(), **common}
    atomic_write_text(reports_dir / "local_parsing_run.json", json.dumps(report, indent=2, default=str) + "\n")
    return report
