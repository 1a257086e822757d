"""Every run's own evaluation on its dev split: perplexity per wordpiece and token accuracy.

Section 5.4: label smoothing "hurts perplexity, as the model learns to be more unsure, but improves
accuracy and BLEU score". A job's claims ask for BLEU, perplexity or F1; the token accuracy that
sentence speaks of is measured by the same pass as the perplexity (:mod:`repro.eval.perplexity`).
Every job records it in its run directory (``evaluations/run.dev.json``): a job whose claims already
measure the dev perplexity has it in that record (``extra.token_accuracy``); the others (Table 2's
jobs, ``repro train``) measure it here, after training, on the model they evaluate.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from repro.data.synthetic import SYNTHETIC
from repro.data.vocab import SharedVocab
from repro.decode.settings import DecodeSettings
from repro.decode.translate import load_model
from repro.errors import MissingSplit
from repro.measures.measure_registry import Request, Trained, measure
from repro.measures.recording import keep_in_run, result_of
from repro.runtime import Runtime
from repro.train.checkpoint import list_checkpoints
from repro.train.config import TrainConfig
from repro.train.data import dataset_for

#: The record of the run's own dev evaluation, ``RUN_DIR/evaluations/run.dev.json``.
DEV_REQUEST = Request("run.dev", "perplexity.wordpiece", "dev")


def measures_dev(requests: Iterable[Request]) -> bool:
    """Whether one of a job's requests already measures the dev split's perplexity (and so its accuracy)."""
    return any(r.measure == DEV_REQUEST.measure and r.split == DEV_REQUEST.split for r in requests)


def evaluate_dev(trained: Trained, *, config: Mapping[str, Any], decode: Mapping[str, Any], scale: str,
                 provenance: Mapping[str, Any] | None = None) -> Path | None:
    """Measure the dev split's perplexity and token accuracy of ``trained`` (every rank takes its share)
    and keep it in the run directory (rank 0); None when the data set has no dev split."""
    try:
        trained.dataset.split(DEV_REQUEST.split)
    except MissingSplit as why:   # a split file that is there but is no file is refused (DataError, exit 2)
        print(f"repro: the run's dev evaluation is skipped: {why}", file=sys.stderr)
        return None
    found = measure(trained, DEV_REQUEST)
    if found is None or not trained.runtime.is_main:
        return None
    return keep_in_run(trained.run_dir, result_of(DEV_REQUEST, found, config=config, decode=decode, scale=scale,
                                                  provenance=provenance))


def evaluate_newest(out_dir: str | Path, recipe: Mapping[str, Any], runtime: Runtime) -> Path | None:
    """``repro train``'s dev evaluation: the run's newest checkpoint, on the dev split of its data set."""
    cfg = TrainConfig.from_dict(dict(recipe["train"]), source=f"{out_dir}: the run's recipe")
    checkpoints = list_checkpoints(out_dir)
    if cfg.dataset == SYNTHETIC or not checkpoints:
        return None
    model, _ = load_model(checkpoints[-1], runtime=runtime)
    decode = DecodeSettings.from_dict(recipe.get("decode") or {}, source=f"{out_dir}: the run's decoding settings")
    trained = Trained(model.eval(), SharedVocab.load(Path(out_dir) / "vocab.json"), dataset_for(cfg), runtime, decode,
                      Path(out_dir), checkpoint=checkpoints[-1], averaged_from=(checkpoints[-1].name,))
    return evaluate_dev(trained, config=cfg.to_dict(), decode=decode.to_dict(),
                        scale=f"repro train: the newest checkpoint ({checkpoints[-1].name})",
                        provenance={"run_dir": str(out_dir)})
