"""``f1.evalb``: Table 4's bracketing F1 of the parser (Section 6.3).

The recipe's search (the parser's: beam 21, alpha 0.3, input + 300) on the split's sentences, on
the job's runtime and split over its ranks; each output repaired into a tree over the source words
(:mod:`repro.parsing.repair`) and scored by EVALB with COLLINS.prm against the gold trees that
:mod:`repro.parsing.prepare` put beside the split; the interval is a bootstrap over sentences.
"""

from __future__ import annotations

import time
from pathlib import Path

from repro.data.test_sets import identity
from repro.data.text_lines import read_lines
from repro.files.writer import atomic_write_text
from repro.decode.translate import search_of, translate_ids
from repro.eval.bootstrap import evalb_interval
from repro.eval.sharding import map_sharded
from repro.measures.measure_registry import Measured, Request, Trained, measurement
from repro.parsing.scoring import score_outputs
from repro.parsing.prepare import gold_trees_file


def decode_trees(trained: Trained, sentences: list[str]) -> tuple[list[str], int]:
    """Linearised trees for ``sentences`` by the recipe's search, and how many ran into the length limit."""
    settings, vocab = trained.search, trained.vocab

    def run(part: list[str]) -> list[tuple[str, bool]]:
        sources = vocab.encode_batch([s.strip() for s in part])
        ids = translate_ids(trained.model, sources, settings, runtime=trained.runtime)
        return [(vocab.decode(out), len(out) >= len(src) + settings.max_len_offset) for src, out in zip(sources, ids)]

    decoded = map_sharded(run, sentences, trained.runtime)
    return [text for text, _ in decoded], sum(at_limit for _, at_limit in decoded)


def gold_trees(trained: Trained, split: str, src: Path, sentences: list[str]) -> tuple[list[str], Path]:
    """The split's sentences and gold trees, the first ``trained.limit`` of them with a limit (written
    to ``RUN_DIR/<split>.first<N>.trees``)."""
    gold = gold_trees_file(src.parent, split)
    if trained.limit is None or trained.limit >= len(sentences):
        return sentences, gold
    lines = read_lines(gold)[:trained.limit]
    path = trained.run_dir / f"{split}.first{trained.limit}.trees"
    if trained.runtime.is_main:
        atomic_write_text(path, "".join(line + "\n" for line in lines))
    return sentences[:trained.limit], path


@measurement("f1.evalb")
def evalb_f1(trained: Trained, request: Request) -> Measured | None:
    """EVALB F1 (COLLINS.prm) of the recipe's search on ``request.split`` (module docstring); rank 0 scores."""
    src, _ = trained.dataset.split(request.split)
    sentences, gold = gold_trees(trained, request.split, src,
                                 read_lines(src))
    start = time.monotonic()
    outputs, at_limit = decode_trees(trained, sentences)
    decoded = time.monotonic()
    if not trained.runtime.is_main:
        return None
    if "outputs" in trained.files:
        atomic_write_text(trained.files["outputs"], "".join(o + "\n" for o in outputs))
    parse = score_outputs(outputs, gold, write_trees=trained.files.get("trees"))
    ev, s = parse.evalb.all, trained.search
    interval = evalb_interval(parse.evalb.rows)
    return Measured(
        round(parse.f1, 2), "F1 (EVALB, COLLINS.prm)",
        f"precision {ev.precision:.2f}, recall {ev.recall:.2f} over {parse.sentences} sentences; {parse.repaired} of "
        f"{parse.sentences} outputs were not a well-formed tree over the source words and were repaired before "
        f"scoring ({parse.leaf_count['too_few']} had fewer XX than words, {parse.leaf_count['too_many']} more; "
        f"{at_limit} ran to the length limit); beam {s.beam_size}, alpha {s.alpha}, max length input + "
        f"{s.max_len_offset}; {trained.checkpoints_averaged} checkpoint(s) averaged",
        f"{trained.dataset.name} {request.split} ({parse.sentences} trees)", 2, ci95=interval.ci95,
        provenance={"decode": {**search_of(s), "max_tokens": s.max_tokens},   # the search decode_trees ran
                    "test_set": {"dataset": trained.dataset.name, "split": request.split, "sentences": parse.sentences,
                                 "source": identity(src), "reference": identity(gold)}},
        extra={"f1": round(parse.f1, 2), "precision": round(ev.precision, 2), "recall": round(ev.recall, 2),
               "repaired": parse.repaired, "at_length_limit": at_limit,
               "complete_match": round(ev.complete_match, 2), "leaf_count": parse.leaf_count,
               "leaf_count_by_length": parse.leaf_count_by_length, "decode": s.to_dict(),
               "bootstrap": interval.to_dict()},
        raw=parse, seconds={"decode": decoded - start, "score": time.monotonic() - decoded})
