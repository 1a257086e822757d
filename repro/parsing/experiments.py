"""The Transformer rows of Table 4 as runnable experiment definitions (Section 6.3).

Section 6.3: "We trained a 4-layer transformer with d_model = 1024 on the Wall Street Journal
(WSJ) portion of the Penn Treebank, about 40K training sentences. We also trained it in a
semi-supervised setting, using the larger high-confidence and BerkeleyParser corpora [...] with
approximately 17M sentences. We used a vocabulary of 16K tokens for the WSJ only setting and a
vocabulary of 32K tokens for the semi-supervised setting. [...] all other parameters remained
unchanged from the English-to-German base translation model. During inference, we increased the
maximum output length to input length + 300. We used a beam size of 21 and α = 0.3."

What the paper does not give, and what is therefore the base model's value here: the number of
training steps (100k), dropout (0.1; the paper tuned it on section 22 but does not report it), the
learning-rate schedule (Eq. 3, warmup 4000) and checkpoint averaging (not mentioned for 6.3; off).

- ``parser-wsj``: trains on WSJ 02-21 prepared by ``python -m repro.parsing.prepare --wsj DIR``.
- ``parser-semi``: the 17M-sentence corpus (the high-confidence corpus of Vinyals & Kaiser et al.
  2014 and the BerkeleyParser-parsed corpus) is not publicly available and is not obtainable here;
  the user must supply it as parallel files (sentence / linearised tree, one per line, in the
  format of :mod:`repro.parsing.linearize`) via ``semi_src``/``semi_tgt``. WSJ 02-21 is not added
  automatically: concatenate it into those files if wanted.
- ``parser-sample``: the local run on the NLTK PTB sample (by-file split, see
  :mod:`repro.parsing.prepare`); a small model for a 2-core CPU. Its F1 measures the pipeline, not
  Table 4: the training set is 3396 sentences (vs ~40K) and the test files are not section 23.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repro.errors import ConfigError
from repro.model import get_preset
from repro.parsing.prepare import split_files


@dataclass(frozen=True)
class DecodeSettings:
    """Section 6.3 inference: beam 21, length penalty α = 0.3, at most input length + 300 tokens."""

    beam_size: int = 21
    alpha: float = 0.3
    max_len_offset: int = 300

    def to_dict(self) -> dict[str, Any]:
        return {"beam_size": self.beam_size, "alpha": self.alpha, "max_len_offset": self.max_len_offset}


@dataclass(frozen=True)
class ParsingExperiment:
    """One Table 4 row (or the local run): model preset, vocabulary, data, decoding, claim id."""

    name: str
    claim_id: str | None
    preset: str
    vocab_size: int
    description: str
    scale: str                         # "cluster" (the paper's setting) or "local"
    data: str                          # what the training data is and where it comes from
    needs_user_corpus: bool = False
    decode: DecodeSettings = DecodeSettings()
    train_overrides: dict[str, Any] = field(default_factory=dict)
    model_overrides: dict[str, Any] = field(default_factory=dict)

    def train_config(self, prepared_dir: str | Path, out_dir: str | Path, *, semi_src: str | Path | None = None,
                     semi_tgt: str | Path | None = None, **overrides: Any):
        """The :class:`repro.train.config.TrainConfig` of this experiment.

        ``prepared_dir`` holds the ``{split}.src``/``{split}.tgt`` files of :mod:`repro.parsing.prepare`
        (WSJ for the paper rows, the PTB sample for the local run); dev is always its ``dev`` split.
        """
        from repro.train.config import TrainConfig

        splits = split_files(prepared_dir, ("train", "dev"))
        train_src, train_tgt = splits["train"]
        if self.needs_user_corpus:
            if semi_src is None or semi_tgt is None:
                raise ConfigError(
                    f"experiment '{self.name}' needs the semi-supervised corpus (~17M sentences, high-confidence "
                    "and BerkeleyParser corpora of Vinyals & Kaiser et al. 2014), which is not available here: "
                    "supply it as parallel sentence/linearised-tree files (semi_src, semi_tgt)")
            train_src, train_tgt = Path(semi_src), Path(semi_tgt)
        fields = {
            "preset": self.preset,
            "model_overrides": dict(self.model_overrides),
            "dataset": str(Path(prepared_dir)),
            "train_src": str(train_src), "train_tgt": str(train_tgt),
            "dev_src": str(splits["dev"][0]), "dev_tgt": str(splits["dev"][1]),
            "vocab_size": self.vocab_size,
            "label_smoothing": get_preset(self.preset).label_smoothing,
            "out_dir": str(out_dir),
            **self.train_overrides,
            **overrides,
        }
        return TrainConfig(**fields)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "claim_id": self.claim_id, "preset": self.preset, "vocab_size": self.vocab_size,
                "description": self.description, "scale": self.scale, "data": self.data,
                "needs_user_corpus": self.needs_user_corpus, "decode": self.decode.to_dict(),
                "train_overrides": dict(self.train_overrides), "model_overrides": dict(self.model_overrides)}


# Parse targets are long (up to ~600 symbols on the PTB sample; ~3x the sentence), so the training
# length filter is raised well above the translation default to keep every tree. BPE splits on
# whitespace only ("words"): the text is PTB-tokenized, and each tree symbol ((NP, )NP, XX) stays one
# token instead of the two ("(" + "NP") a byte-level split makes, which would make targets ~1.5x longer.
_PAPER_TRAIN = {"max_len": 1024, "average_last": 1, "keep_checkpoints": 5, "bpe_split": "words"}

EXPERIMENTS: dict[str, ParsingExperiment] = {e.name: e for e in (
    ParsingExperiment(
        name="parser-wsj", claim_id="table4.f1.wsj-only", preset="parser-wsj", vocab_size=16000,
        description="Table 4, Transformer (4 layers), WSJ only: 91.3 F1 on WSJ section 23 in the paper",
        scale="cluster", data="Penn Treebank WSJ sections 02-21 (train), 22 (dev), 23 (test); user-supplied treebank",
        train_overrides=dict(_PAPER_TRAIN)),
    ParsingExperiment(
        name="parser-semi", claim_id="table4.f1.semi", preset="parser-semi", vocab_size=32000,
        description="Table 4, Transformer (4 layers), semi-supervised: 92.7 F1 on WSJ section 23 in the paper",
        scale="cluster", needs_user_corpus=True,
        data="~17M sentences (high-confidence + BerkeleyParser corpora), NOT obtainable here: user-supplied; "
             "dev/test WSJ 22/23",
        train_overrides=dict(_PAPER_TRAIN)),
    ParsingExperiment(
        name="parser-sample", claim_id=None, preset="parser-wsj", vocab_size=4000,
        description="local run on the NLTK PTB sample (3396 train sentences, WSJ 00-01 files); "
                    "checks the pipeline, not comparable with Table 4",
        scale="local", data="ptb-nltk-sample, by-file split wsj_0001-0159 / 0160-0179 / 0180-0199",
        model_overrides={"d_model": 128, "d_ff": 512, "n_heads": 4},
        train_overrides={"tokens_per_batch": 4000, "max_tokens_per_device": 4000, "max_steps": 3000,
                         "warmup_steps": 600, "max_len": 1024, "checkpoint_every_steps": 500,
                         "keep_checkpoints": 3, "average_last": 1, "device": "cpu", "log_every": 50,
                         "bpe_split": "words"}),
)}


def get_experiment(name: str) -> ParsingExperiment:
    try:
        return EXPERIMENTS[name]
    except KeyError:
        raise ConfigError(f"unknown parsing experiment '{name}'; known: {', '.join(EXPERIMENTS)}") from None
