"""Every named recipe, defined once: the model, how it is trained, and how its outputs are searched.

A :class:`Recipe` is a model (a preset of :mod:`repro.model.presets` with overrides), a
:class:`~repro.train.config.TrainConfig` and :class:`~repro.decode.settings.DecodeSettings`.
The command line (``repro train --profile``), the cluster experiments (``repro submit``), the
parsing experiments and the local pipelines (``repro reproduce``) all pick a recipe here and
derive what they run with :meth:`Recipe.replace`, which routes each field to the one class
that defines it (``--set FIELD=JSON`` goes through the same route).

The paper's recipes:

=================  =====================================================================
``base``           Sections 5 and 6.1: WMT 2014 EN-DE, 100k steps, average of the last 5
``big``            Table 2/3 big: 300k steps, P_drop 0.3, average of the last 20
``big-enfr``       Section 6.1: EN-FR big, P_drop 0.1, 32000 word-pieces
``base-enfr``      Table 2 base EN-FR (Section 5.1's 32000 word-pieces)
``table3-<row>``   Table 3's 20 rows: newstest2013 dev, "no checkpoint averaging"
``parser-wsj``     Section 6.3: 4 layers, d_model 1024, 16K vocabulary, WSJ only
``parser-semi``    Section 6.3: the same with 32K vocabulary, semi-supervised
=================  =====================================================================

and the project's own: ``local`` (the main job: Multi30k on a 2-core CPU), ``local-parsing``
(Section 6.3's parser shrunk to the Penn Treebank sample) and ``smoke`` (a synthetic copy task
that trains in seconds, for the cluster path). ``paper`` and ``paper-big`` are the names the
``--profile`` flag has always taken for ``base`` and ``big``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, get_type_hints

from repro.files import strict_json
from repro.data.corpora import SEMI_PARSING, WSJ_PARSING
from repro.data.synthetic import SYNTHETIC
from repro.decode.settings import PARSING, TRANSLATION, DecodeSettings
from repro.errors import ConfigError
from repro.model import TABLE3_ROWS, TransformerConfig, get_preset
from repro.model.table3 import cells_of as table3_cells
from repro.model.table3 import changes as table3_changes
from repro.model.table3 import get_row as get_table3_row
from repro.parsing.linearize import TARGET_UNITS
from repro.train.config import TrainConfig
from repro.train.schedule import paper_peak_scale

MODEL_FIELDS = tuple(f.name for f in dataclasses.fields(TransformerConfig))
TRAIN_FIELDS = tuple(f.name for f in dataclasses.fields(TrainConfig))
DECODE_FIELDS = tuple(f.name for f in dataclasses.fields(DecodeSettings))
#: The recipe's own fields (the rest of a recipe is its TrainConfig and DecodeSettings).
RECIPE_FIELDS = ("name", "source", "targets")


@dataclass(frozen=True)
class Recipe:
    """A named way to build, train and decode a Transformer, with its place in the paper."""

    name: str
    source: str
    train: TrainConfig
    decode: DecodeSettings = TRANSLATION
    #: How a parser recipe's linearised trees are cut into target tokens (:data:`repro.parsing.linearize.TARGET_UNITS`):
    #: ``symbols`` (Vinyals & Kaiser et al.'s, one token per bracket and ``XX``) or ``per-word`` (the same string,
    #: one token per word). The parsing pipelines prepare their data with it; translation recipes ignore it.
    targets: str = "symbols"

    def __post_init__(self) -> None:
        if self.targets not in TARGET_UNITS:
            raise ConfigError(f"recipe {self.name}: field 'targets' must be one of {', '.join(TARGET_UNITS)}, "
                              f"got {self.targets!r}")

    @property
    def model(self) -> TransformerConfig:
        """The architecture (the preset with ``model_overrides``; vocabulary sizes as the preset has them)."""
        return self.train.model_config()

    def replace(self, **changes: Any) -> "Recipe":
        """A variant: each change goes to the class that defines its field.

        Model fields (``d_model``, ``dropout``, ...) are merged into ``model_overrides``, as is a
        ``model_overrides`` mapping; training fields go to the TrainConfig, decoding fields to the
        DecodeSettings, ``name``/``source``/``targets`` to the recipe. The result is validated whole.
        """
        recipe_changes = {k: changes.pop(k) for k in RECIPE_FIELDS if k in changes}
        overrides = changes.pop("model_overrides", {})
        if not isinstance(overrides, Mapping):   # [] or null is no object either (it read as "no overrides")
            raise ConfigError(f"recipe {self.name}: field 'model_overrides' must be a JSON object of TransformerConfig "
                              f"fields, got {overrides!r}")
        model = dict(overrides)
        train: dict[str, Any] = {}
        decode: dict[str, Any] = {}
        unknown = []
        for key, value in changes.items():
            if key in MODEL_FIELDS:
                model[key] = value
            elif key in TRAIN_FIELDS:
                train[key] = value
            elif key in DECODE_FIELDS:
                decode[key] = value
            else:
                unknown.append(key)
        if unknown:
            raise ConfigError(f"recipe {self.name}: unknown field(s) {', '.join(sorted(unknown))} (fields are those of "
                              "TransformerConfig, TrainConfig and DecodeSettings, and the recipe's name, source and targets)")
        if model:
            train["model_overrides"] = {**self.train.model_overrides, **model}
        new = dataclasses.replace(self, train=self.train.replace(**train) if train else self.train,
                                  decode=self.decode.replace(**decode) if decode else self.decode, **recipe_changes)
        new.model  # noqa: B018 - builds the model config, so a bad model override fails here, by name
        return new

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "source": self.source, "train": self.train.to_dict(),
                "decode": self.decode.to_dict(), "targets": self.targets}


# -- the paper ------------------------------------------------------------------------------------

#: Section 5.2: "each training step took about 0.4 seconds" (base models), "1.0 seconds" (big
#: models), on 8 P100s. Section 6.1: "checkpoints, which were written at 10-minute intervals".
PAPER_STEP_SECONDS = {"base": 0.4, "big": 1.0}
CHECKPOINT_MINUTES = 10


def paper_checkpoint_spacing(size: str) -> int:
    """Updates between two checkpoints: the paper's 10 minutes at its step time (1500 base, 600 big).

    Counted in updates, not wall time, so that "the last 5 (20) checkpoints" span the same share of
    training on any hardware: on an H100, 10 wall-clock minutes hold many more updates than on a P100.
    """
    return round(CHECKPOINT_MINUTES * 60 / PAPER_STEP_SECONDS[size])


def _paper(name: str, source: str, preset: str, size: str = "base", **train: Any) -> Recipe:
    """A paper recipe: the preset's own vocabulary size is the BPE size to learn (Section 5.1);
    checkpoints every :func:`paper_checkpoint_spacing` updates of the model's ``size``; Eq. 1 through
    the fused kernel (the same attention as the reference path, tested equal; on a GPU the fast one);
    passes cut from length buckets, as tensor2tensor cuts them (:mod:`repro.data.buckets`)."""
    vocab = get_preset(preset).model.src_vocab_size
    spacing = {"checkpoint_every_steps": paper_checkpoint_spacing(size), "checkpoint_every_minutes": 0.0}
    return Recipe(name, source, TrainConfig(preset=preset, vocab_size=vocab, model_overrides={"attention": "fused"},
                                            max_tokens_per_device=PAPER_PASS_PADDED, batching="buckets",
                                            **{**spacing, **train}))


#: The padded bound of a paper recipe's pass: one pass may hold the update's ~25000 real tokens per
#: side with its padding (~4 % of a pass from length buckets on WMT EN-DE, ~18 % cut from one sorted
#: epoch of the 10k-pair sample); a cluster profile that fits less accumulates
#: (its ``max_tokens_per_device`` is the smaller bound, :meth:`repro.cluster.experiments.Plan.fit`).
PAPER_PASS_PADDED = 32000


BASE = _paper("base", "Sections 5 and 6.1: base model, WMT 2014 EN-DE, 100k steps, average of the last 5 "
              "checkpoints (one every 1500 updates: 10 minutes at 0.4 s per step)", "base")
BIG = _paper("big", "Section 5.2, Table 3 (big): 300k steps, P_drop 0.3; Section 6.1: average of the last 20 "
             "(one every 600 updates: 10 minutes at 1.0 s per step)",
             "big", "big", max_steps=300_000, average_last=20)
BIG_ENFR = _paper("big-enfr", "Section 6.1: big model on WMT 2014 EN-FR, P_drop 0.1, 32000 word-pieces", "big-enfr",
                  "big", dataset="wmt14-en-fr", max_steps=300_000, average_last=20)
BASE_ENFR = _paper("base-enfr", "Table 2: base model on WMT 2014 EN-FR, 32000 word-pieces (Section 5.1)",
                   "base-enfr", dataset="wmt14-en-fr")

def _table3(row: str) -> Recipe:
    """A row of Table 3: the base (big) recipe with the row's cells (:mod:`repro.model.table3`: its
    architecture is the preset of the same name, its epsilon_ls and train steps are set here),
    measured on newstest2013 with "no checkpoint averaging" (the newest checkpoint)."""
    start = BIG if row == "big" else BASE
    return start.replace(name=f"table3-{row}", source=f"Table 3 row {row} (newstest2013, no checkpoint averaging)",
                         preset=row, average_last=1, **table3_changes(row).train)


# Section 6.3: "all other parameters remained unchanged from the English-to-German base translation
# model". Parse targets are long (up to ~600 symbols on the PTB sample, ~3x the sentence), so the
# length filter is raised to keep every tree. The vocabulary is word-level (a data-side choice, as
# Vinyals & Kaiser et al. used words with an unknown token): every tree symbol ((NP, )NP, XX) and
# every source word is one token, rare words become Berkeley-style unknown-word classes
# (repro.data.signatures), so the source has exactly one token per XX of the target. With a BPE
# vocabulary a rare word is several pieces and the model must count words from pieces: on the PTB
# sample 215-237 of 245 test outputs had too few leaves (reports/notes/2026-11-24-parser-issue18.md).
# The paper does not mention averaging for 6.3: off.
_PARSER_TRAINING = {"max_len": 1024, "average_last": 1, "keep_checkpoints": 5, "bpe_split": "word-level"}

PARSER_WSJ = dataclasses.replace(
    _paper("parser-wsj", "Section 6.3: 4 layers, d_model 1024, 16K vocabulary, WSJ only (~40K trees)",
           "parser-wsj", dataset=WSJ_PARSING, **_PARSER_TRAINING), decode=PARSING)
PARSER_SEMI = dataclasses.replace(
    _paper("parser-semi", "Section 6.3: 4 layers, d_model 1024, 32K vocabulary, semi-supervised (~17M sentences)",
           "parser-semi", dataset=SEMI_PARSING, **_PARSER_TRAINING), decode=PARSING)

# -- the project's own ------------------------------------------------------------------------------

#: The main job: d_model 256, 3 layers, d_ff 1024, 4 heads, one 8k BPE on Multi30k; Eq. 3 halved
#: (it peaks at 1.8e-3 after the short warm-up of a short run). Measured: 0.95 s per update on 2 cores.
LOCAL = Recipe("local", "the project's laptop-scale check of Sections 5 and 6.1 (not the paper's scale)", TrainConfig(
    preset="base",
    model_overrides={"n_layers": 3, "d_model": 256, "d_ff": 1024, "n_heads": 4, "attention": "fused"},
    dataset="multi30k-en-de",
    vocab_size=8000,
    tokens_per_batch=2500,
    max_tokens_per_device=2500,
    max_steps=1000,
    warmup_steps=300,
    lr_scale=0.5,
    max_len=100,
    checkpoint_every_steps=80,
    checkpoint_every_minutes=10.0,
    keep_checkpoints=5,
    average_last=5,
    out_dir="runs/local",
    device="cpu",
    log_every=10,
))

#: Section 6.3's parser shrunk to the NLTK Penn Treebank sample (3396 training trees), issue 18.
#: The same post-norm Transformer, linearised trees and search; what the scale changes, each
#: measured side by side (reports/notes/2026-11-24-parser-issue18.md; dev F1, greedy, after 1600 updates):
#: - one layer (N 1, d_model 128, d_ff 512, 4 heads): at this budget the decoder learns to look at
#:   the word it writes only with few layers (leaf attention at chance with N 4; N 4 <= 16, N 2 26,
#:   N 1 40 with the same per-word tokens and 8000-token vocabulary);
#: - per-word target tokens (``targets``: the same Vinyals & Kaiser string, one token per word, so
#:   output i is word i's): +6 over symbols at N 2;
#: - a word-level vocabulary of 4000: every tree token of the training split (3004 per-word tokens)
#:   and the ~1000 most frequent words, the rest as unknown-word classes (all 5.3K words seen
#:   twice: 40; 58 this way). Fewer words generalise better from 3396 trees, and the softmax, most
#:   of a 1-layer model's work, is half as wide;
#: - the rate: twice the rule for scaled-down recipes (:func:`repro.train.schedule.paper_peak_scale`,
#:   Eq. 3 peaking at the paper's base peak 7.0e-4), peak 1.4e-3: ahead of the rule at N 1 (36.0
#:   against 28.5 at 1200 updates) and N 4, and of four times the rule at N 2;
#: - 3600 updates of ~2000 target tokens (~80 epochs), a checkpoint (and the probe: train and dev NLL,
#:   greedy dev F1, :class:`repro.pipeline.parsing.ParserProbe`) every 400, so that the whole job fits
#:   in 20 minutes on 2 cores.
#: The dataset is the folder the pipeline prepares (``repro.parsing.prepare``); decoding is 6.3's.
LOCAL_PARSING = dataclasses.replace(PARSER_WSJ.replace(
    name="local-parsing",
    source="the project's laptop-scale run of Section 6.3 on the Penn Treebank sample (not comparable with Table 4)",
    n_layers=1, d_model=128, d_ff=512, n_heads=4, attention="fused",
    dataset="ptb-sample-prepared", vocab_size=4000, tokens_per_batch=2000, max_tokens_per_device=2000,
    max_steps=3600, warmup_steps=300, lr_scale=2 * paper_peak_scale(128, 300), checkpoint_every_steps=400,
    keep_checkpoints=3,
    out_dir="runs/local-parsing", device="cpu", log_every=50,
), targets="per-word")

#: A synthetic copy task (:mod:`repro.data.synthetic`) that one CPU core trains in seconds: the
#: cluster path (submit, requeue, resume) end to end. 128 tokens per update in 4 passes of 32.
SMOKE = Recipe("smoke", "the project's smoke test of the training and cluster path (synthetic data)", TrainConfig(
    preset="base",
    model_overrides={"n_layers": 1, "d_model": 32, "d_ff": 64, "n_heads": 2, "dropout": 0.0},
    dataset=SYNTHETIC,
    vocab_size=32,
    tokens_per_batch=128,
    max_tokens_per_device=32,
    max_steps=30,
    warmup_steps=10,
    lr_scale=0.05,
    label_smoothing=0.0,
    checkpoint_every_steps=5,
    keep_checkpoints=3,
    average_last=1,
    out_dir="runs/smoke",
    device="cpu",
    log_every=5,
))

# -- Table 3 at other scales ----------------------------------------------------------------------

@dataclass(frozen=True)
class Scale:
    """A named scale at which Table 3 is rerun: its base row (a recipe, as ``table3-base`` is the
    paper's) and what it stands for. Every row at the scale is the base with the same change the
    paper makes to its own base (:func:`repro.model.table3.changes`); the scale's dev split plays
    newstest2013's role. Results at a scale are recorded as ``scale: <name>: ...``, never as a
    reproduction of the paper's figures."""

    name: str
    description: str
    base: Recipe

    def cells(self) -> dict[str, Any]:
        """Table 3's cells of the scale's base row (N, d_model, ..., train steps)."""
        return table3_cells(self.base.model, self.base.train)

    def row(self, row: str) -> Recipe:
        """Table 3's ``row`` at this scale: the base recipe with the row's change."""
        change = table3_changes(row, self.cells())
        paper = get_table3_row(row)
        return self.base.replace(
            name=f"table3-{self.name}-{row}",
            source=f"Table 3 row {row} at scale {self.name}: {change.label()} (the paper's row: {paper.label}); "
                   f"{self.description}",
            **change.model, **change.train)


def _scaled_base(name: str, **train: Any) -> Recipe:
    """A scale's base row: Table 3's base recipe (no checkpoint averaging, Eq. 1 fused) at a smaller size,
    one checkpoint kept (the newest, which is evaluated), written often enough to resume a preempted job."""
    return Recipe(f"table3-{name}-base", f"Table 3's base row at scale {name} (not the paper's scale)",
                  TrainConfig(preset="base", average_last=1, keep_checkpoints=1, checkpoint_every_minutes=0.0,
                              out_dir=f"runs/table3-{name}", device="auto", **train))


#: ``small``: Multi30k on a CPU. d_model 128, h 8 (so d_k = 16 and row (A)'s h = 1 ... 32 are the
#: paper's), N 3 (so row (C)'s N = 2, 4, 8 become 1, 2, 4), d_ff 512, a joint 8k BPE as the main
#: job's; 300 updates of ~2000 + 2000 tokens (~1.6 epochs); Eq. 3 at twice the rule for scaled-down
#: recipes (the local parser's rate: peak 1.4e-3 at d_model 128; a row's own d_model moves it as Eq. 3
#: does). Sized so that the CPU subset (base, rows A and D, 2 seeds: 18 runs) is expected to fit
#: about 30 minutes on 2 cores (docs/cluster.md, "Table 3 at your scale").
SMALL = Scale("small", "Multi30k EN-DE (29k pairs), dev = val (1014 pairs)", _scaled_base(
    "small", model_overrides={"n_layers": 3, "d_model": 128, "d_ff": 512, "n_heads": 8, "attention": "fused"},
    dataset="multi30k-en-de", vocab_size=8000, tokens_per_batch=2000, max_tokens_per_device=2000, max_len=100,
    max_steps=300, warmup_steps=100, lr_scale=2 * paper_peak_scale(128, 100), checkpoint_every_steps=100,
    log_every=25))
#: ``medium``: the WMT EN-DE sample (10k pairs, newstest2012 as dev) on one GPU. d_model 256, h 8, the
#: paper's N 6 (row (C)'s N as printed), d_ff 1024; 3000 updates of ~4000 + 4000 tokens.
MEDIUM = Scale("medium", "WMT EN-DE sample (10k pairs, Moses-tokenized), dev = newstest2012 (3000 pairs)",
               _scaled_base("medium", model_overrides={"n_layers": 6, "d_model": 256, "d_ff": 1024, "n_heads": 8,
                                                       "attention": "fused"},
                            dataset="opennmt-wmt-ende-sample", vocab_size=8000, tokens_per_batch=4000,
                            max_tokens_per_device=4000, max_len=128, max_steps=3000, warmup_steps=400,
                            lr_scale=2 * paper_peak_scale(256, 400), checkpoint_every_steps=500, log_every=50))
SCALES: dict[str, Scale] = {s.name: s for s in (SMALL, MEDIUM)}


def get_scale(name: str) -> Scale:
    try:
        return SCALES[name]
    except KeyError:
        raise ConfigError(f"unknown scale '{name}'; known scales: {', '.join(SCALES)}") from None


RECIPES: dict[str, Recipe] = {r.name: r for r in (
    BASE, BIG, BIG_ENFR, BASE_ENFR, *(_table3(row) for row in TABLE3_ROWS), PARSER_WSJ, PARSER_SEMI,
    LOCAL, LOCAL_PARSING, SMOKE, *(scale.row(row) for scale in SCALES.values() for row in TABLE3_ROWS),
)}
#: Names the ``--profile`` flag has always accepted.
ALIASES = {"paper": "base", "paper-big": "big"}


def recipe_names() -> list[str]:
    """Every name :func:`get_recipe` takes, aliases included."""
    return [*RECIPES, *ALIASES]


def get_recipe(name: str) -> Recipe:
    try:
        return RECIPES[ALIASES.get(name, name)]
    except KeyError:
        raise ConfigError(f"unknown recipe '{name}'; known recipes: {', '.join(recipe_names())}") from None


# -- FIELD=VALUE assignments (``--set``) ---------------------------------------------------------

def _string_fields() -> set[str]:
    """Fields whose value is text (``--set dataset=wmt14-en-de`` needs no JSON quotes)."""
    names = set(RECIPE_FIELDS)
    for cls in (TransformerConfig, TrainConfig, DecodeSettings):
        for name, hint in get_type_hints(cls).items():
            if hint is str or str(hint) in ("str | None", "typing.Optional[str]"):
                names.add(name)
    return names


def parse_assignments(items: Iterable[str], *, flag: str = "--set") -> dict[str, Any]:
    """``FIELD=VALUE`` items as a dict. VALUE is JSON; a text field may also take bare text."""
    strings = _string_fields()
    changes: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"{flag} {item!r}: expected FIELD=VALUE")
        if key in changes:
            raise ConfigError(f"{flag} {item!r}: field '{key}' is set twice (first to {changes[key]!r}); give it once")
        try:
            json.loads(raw)
        except RecursionError:   # valid or not, nested past any field's use: strict_json names the bound
            strict_json.loads(raw, f"{flag} {key}", error=ConfigError)
        except ValueError as err:   # not JSON (or a number of more than 4300 digits)
            if key not in strings:
                raise ConfigError(f"{flag} {item[:200]!r}: the value of field '{key}' must be JSON "
                                  f"({getattr(err, 'msg', str(err))})") from None
            changes[key] = raw
            continue
        # valid JSON: read again strictly (a key twice in an object, NaN and Infinity are refused)
        try:
            changes[key] = strict_json.loads(raw, f"{flag} {key}", error=ConfigError)
        except ConfigError:
            if key not in strings:
                raise
            changes[key] = raw  # text such as dataset=NaN
    return changes


def apply_assignments(recipe: Recipe, changes: Mapping[str, Any], *, flag: str = "--set") -> Recipe:
    """``recipe`` with ``changes`` (from :func:`parse_assignments`), the flag named on error."""
    try:
        return recipe.replace(**changes)
    except ConfigError as err:
        raise ConfigError(f"{flag}: {err}") from None
