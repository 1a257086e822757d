"""Sections 3.1, 3.4 and 3.5 observed on a run's own model: where its layer normalisation sits, which of its
weight matrices are one, which positional encoding it adds, as the weights of its newest checkpoint hold
them (``repro check --run DIR``, basis ``run``).

Each is read off the weights first (a pre-norm stack keeps a closing LayerNorm, ``encoder_norm`` and
``decoder_norm``, that a post-norm stack does without; tied matrices are stored once under several names;
learned positions are a trained table, sinusoids no weight at all), then the checkpoint's model config must
say the same: where the two disagree the checkpoint contradicts itself and the claim fails.
"""

from __future__ import annotations

from typing import Any

from repro.checks.observed_records import built_as_recipe
from repro.checks.registry import checker
from repro.claims.claim import Claim
from repro.claims.outcome import CheckContext, Contradiction, Measurement, NotRun
from repro.observed.judge import judge, paper_job
from repro.train.config import TrainConfig

#: Section 3.4's sharing, in words.
ONE_MATRIX = "one matrix for both embeddings and the pre-softmax projection"
#: What the paper's statement of each part says, read off a model config.
_CONFIG_SAYS = {"norm": lambda c: "pre-norm" if c.norm_first else "post-norm",
                "sharing": lambda c: ONE_MATRIX if c.share_embeddings and c.tie_output else "untied matrices",
                "positions": lambda c: c.positional}

#: The weights the paper's embedding layers and pre-softmax projection are (Section 3.4), by their names.
_SHARED = ("src_embed.lut.weight", "tgt_embed.lut.weight", "output_projection.weight")


def _norm(newest: Any) -> tuple[str, bool]:
    closing = [n for n in newest.shapes if n.split(".")[0] in ("encoder_norm", "decoder_norm")]
    return ("pre-norm" if closing else "post-norm"), bool(newest.model_config.get("norm_first"))


def _sharing(newest: Any) -> tuple[str, frozenset[str]]:
    """The tying of the embeddings and the pre-softmax projection, in words, and which pairs are one matrix."""
    short = {name: name.split(".")[0] for name in _SHARED}
    pairs = frozenset(f"{short[a]}={short[b]}" for g in newest.tied for a in _SHARED for b in _SHARED
                      if a < b and a in g and b in g)
    if len(pairs) == 3:
        return ONE_MATRIX, pairs
    return (f"only {', '.join(sorted(pairs))} tied" if pairs else "three separate matrices"), pairs


def _positions(newest: Any) -> tuple[str, bool]:
    learned = any(n.split(".")[0] in ("src_pos", "tgt_pos") for n in newest.shapes)
    return ("learned" if learned else "sinusoidal"), newest.model_config.get("positional") == "learned"


@checker("observed.architecture", audits=False, evidence="run")
def architecture(claim: Claim, ctx: CheckContext) -> Measurement:
    """What ``part`` (``norm``, ``sharing`` or ``positions``) of the run's model is, read off its newest
    checkpoint's weights, which its model config must agree with (module docstring)."""
    files = ctx.target
    job = paper_job(claim, files)
    part = claim.params["part"]
    if job is not None:   # a job of the paper whose recipe builds this part otherwise (Table 3's row E: learned positions)
        theirs = _CONFIG_SAYS[part](TrainConfig.from_dict(dict(job.spec.train), source=f"the paper's job {job.job}")
                                    .model_config(37000))
        if theirs != claim.expected:
            raise NotRun(f"needs another run: the statement is about the paper's models with {claim.expected}; this run "
                         f"stands for {job.job}, whose recipe builds {theirs}")
    if files.newest is None:
        raise NotRun(f"needs another run: {files.path / 'checkpoints'} holds no checkpoint (the model as built)")
    newest = files.newest
    config = built_as_recipe(files)
    if part == "norm":
        value, flag = _norm(newest)
        said, asked = ("pre-norm" if flag else "post-norm"), f"norm_first {flag}"
        contradicts = (value == "pre-norm") != flag
    elif part == "sharing":
        value, pairs = _sharing(newest)
        share, tie = bool(config.get("share_embeddings")), bool(config.get("tie_output"))
        said = asked = f"share_embeddings {share}, tie_output {tie}"
        built = {"src_embed=tgt_embed"} if share else set()
        built |= {"output_projection=tgt_embed"} if tie else set()
        contradicts = pairs != (frozenset({"src_embed=tgt_embed", "output_projection=tgt_embed",
                                           "output_projection=src_embed"}) if share and tie else built)
    else:
        value, flag = _positions(newest)
        said, asked = f"positional {config.get('positional')!r}", f"positional {config.get('positional')!r}"
        contradicts = (value == "learned") != flag
    if contradicts:
        raise Contradiction(f"{newest.path}: its weights are {value}, but its model config says {said}", value)
    return judge(claim, value, f"{value}, on the weights of {newest.path.name} ({said})", [asked])
