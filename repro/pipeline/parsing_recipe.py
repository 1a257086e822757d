"""The local parser's recipe, pointed at a prepared Penn Treebank folder (Section 6.3 at small scale).

Shared by the local parsing pipeline (:mod:`repro.pipeline.parsing`), its sanity run
(:mod:`repro.pipeline.parsing_sanity`) and its learning curve (:mod:`repro.pipeline.parsing_curve`).
"""

from __future__ import annotations

from pathlib import Path

from repro.parsing.prepare import require_targets, split_files
from repro.recipes import Recipe

#: The recipe the local parsing runs train (:data:`repro.recipes` ``local-parsing``).
RECIPE = "local-parsing"


def on_prepared_data(recipe: Recipe, prepared: Path) -> Recipe:
    """``recipe`` reading its training and dev pairs from a folder made by :mod:`repro.parsing.prepare`,
    whose target units must be the recipe's."""
    require_targets(prepared, recipe.targets, f"recipe {recipe.name}")
    splits = split_files(prepared, ("train", "dev"))
    (train_src, train_tgt), (dev_src, dev_tgt) = splits["train"], splits["dev"]
    return recipe.replace(dataset=str(prepared), train_src=str(train_src), train_tgt=str(train_tgt),
                          dev_src=str(dev_src), dev_tgt=str(dev_tgt))
