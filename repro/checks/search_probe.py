"""The evaluation's own search, driven by scripted models whose answer is known (Sections 6.1, 6.3).

The decoding claims watch the search the paper's numbers come from: for repro, the evaluation's
:func:`repro.decode.translate.translate_ids` (what :func:`repro.eval.translation.evaluate_bleu`
and the cluster jobs' evaluation call), with the decoding settings of the job's spec
(``repro submit``), through the key/value cache and with several sentences batched together, as
the evaluation runs it. The model it searches is :class:`ScriptedBatchModel`: each sentence has
its own script (the next-token distribution as a function of the prefix), the sentence a row
belongs to is read from the encoder output the search carries along, and the prefix of each row
is kept in a cache that the search must reorder as hypotheses survive (a search that does not
reorder its cache decodes the wrong prefixes and fails the claims).

Another implementation is driven through its adapter's ``search`` (one sentence at a time, with
the settings its ``hyperparameters()`` report, else the claim's, said so in the detail).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import torch
from torch import Tensor, nn

from repro.checks.jobs import job_spec, watches_jobs
from repro.claims.claim import Claim
from repro.claims.compare import finite
from repro.claims.outcome import CheckContext, NotApplicable
from repro.data.vocab import PAD
from repro.decode.settings import DecodeSettings
from repro.decode.translate import translate_ids

BOS, EOS = 1, 2
VOCAB = 160
FILLER = 5  # the token scripted paths repeat
#: Source token that names sentence i: TAG + i at the first position (the others are FILLER).
TAG = 200
#: A search that runs this far past its own limit is stopped (it would never end otherwise); a
#: shorter overrun is left to the claims to measure.
HANG_GUARD = 200
#: The evaluation's batch size (source tokens x beam), as the cluster jobs' evaluation sets it.
EVALUATION_MAX_TOKENS = 8000

Rule = Callable[[tuple[int, ...]], "dict[int, float] | Tensor"]


def log_probs(dist: dict[int, float]) -> Tensor:
    """The (VOCAB,) log-probabilities of a {token: probability} distribution (-inf elsewhere)."""
    out = torch.full((VOCAB,), float("-inf"))
    for token, prob in dist.items():
        out[token] = math.log(prob)
    return out


@dataclass
class Watch:
    """What the search asked of one sentence's script: calls and the longest prefix."""

    calls: int = 0
    longest: int = 0
    #: prefixes asked for that hold an EOS: a finished hypothesis the search extended
    past_eos: int = 0

    def ask(self, rule: Rule, prefix: tuple[int, ...], limit: int) -> "dict[int, float] | Tensor":
        """The script's distribution after ``prefix``, counted. A prefix that holds a possible
        hypothesis's EOS (every token up to it likely under the script) is a finished hypothesis
        extended: counted in ``past_eos`` and answered with EOS alone. (A beam's rows that hold no
        hypothesis, score -inf, may carry any prefix: a script that counts must keep at least
        beam_size likely candidates alive at every step, as ``decode.finished_stay_finished``'s does.)"""
        self.calls += 1
        self.longest = max(self.longest, len(prefix))
        if len(prefix) > limit:
            raise RuntimeError(f"the search asked for token {len(prefix) + 1}, past the output limit {limit}")
        if EOS not in prefix:
            return rule(prefix)
        end = prefix.index(EOS)
        if all(_likely(rule(prefix[:i]), prefix[i]) for i in range(end + 1)):
            self.past_eos += 1
        return {EOS: 1.0}


def _likely(dist: "dict[int, float] | Tensor", token: int) -> bool:
    if isinstance(dist, Tensor):
        return bool(torch.isfinite(dist[token]))
    return dist.get(token, 0.0) > 0


class _PrefixCache:
    """The scripted model's cache: the prefix of each row. ``reorder`` keeps the rows the search keeps."""

    def __init__(self) -> None:
        self.prefixes: list[tuple[int, ...]] | None = None
        self.length = 0

    def reorder(self, index: Tensor) -> None:
        assert self.prefixes is not None
        self.prefixes = [self.prefixes[i] for i in index.tolist()]


class ScriptedBatchModel(nn.Module):
    """What the search needs of a model, scripted per sentence (``rules[i]`` for sentence i, whose
    first source token is ``TAG + i``); ``limits[i]``: a prefix longer than this is refused (a search
    that never stops would otherwise hang the check)."""

    def __init__(self, rules: Sequence[Rule], limits: Sequence[int]) -> None:
        super().__init__()
        self.rules, self.limits = list(rules), list(limits)
        self.watch = [Watch() for _ in rules]
        self.cfg = SimpleNamespace(pad_id=PAD)
        self._rows: list[tuple[int, tuple[int, ...]]] = []
        # Where the model lives, for a search that asks its parameters (the script itself has none).
        self.anchor = nn.Parameter(torch.zeros(1), requires_grad=False)

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor]:
        return src[:, :1].float()[..., None].expand(-1, src.size(1), 1).contiguous(), (src != PAD)[:, None, None, :]

    def new_cache(self, capacity: int = 0) -> _PrefixCache:
        return _PrefixCache()

    def decode(self, tgt_in: Tensor, memory: Tensor, src_mask: Tensor, cache: _PrefixCache | None = None) -> Tensor:
        rows = tgt_in.tolist()
        if cache is None:
            prefixes = [tuple(r) for r in rows]
        else:
            if cache.prefixes is None:
                cache.prefixes = [() for _ in rows]
            cache.prefixes = [p + tuple(r) for p, r in zip(cache.prefixes, rows)]
            cache.length += tgt_in.size(1)
            prefixes = cache.prefixes
        sentences = [int(round(float(v))) - TAG for v in memory[:, 0, 0].tolist()]
        self._rows = [(s, p[1:]) for s, p in zip(sentences, prefixes)]  # without BOS
        return torch.zeros(tgt_in.size(0), tgt_in.size(1), 1)

    def project(self, hidden: Tensor) -> Tensor:
        out = []
        for sentence, prefix in self._rows:
            dist = self.watch[sentence].ask(self.rules[sentence], prefix, self.limits[sentence])
            out.append(dist if isinstance(dist, Tensor) else log_probs(dist))
        return torch.stack(out).float()


@dataclass
class Searcher:
    """The search a claim watches and the settings it runs with (and where they come from)."""

    settings: DecodeSettings
    where: str
    run: Callable[[Sequence[Rule], Sequence[int]], tuple[list[list[int]], list[Watch]]]
    notes: list[str] = field(default_factory=list)
    #: The settings (``beam_size``, ``alpha``, ``max_len_offset``) the claim gave because the
    #: implementation reports none: a claim that observes one of these tests the mechanism only.
    given: frozenset[str] = frozenset()

    def __call__(self, rules: Sequence[Rule], source_lengths: Sequence[int]) -> tuple[list[list[int]], list[Watch]]:
        """The outputs (without BOS and EOS) of sentences of these source lengths, each scripted by
        its rule, and what the search asked of each script."""
        return self.run(rules, source_lengths)


def _sources(lengths: Sequence[int]) -> list[list[int]]:
    return [[TAG + i] + [FILLER] * (n - 1) for i, n in enumerate(lengths)]


def evaluation_searcher(experiment: str, greedy: bool = False) -> Searcher:
    """repro's evaluation search (:func:`repro.decode.translate.translate_ids`, cached, batched)
    with the decoding settings of the job ``repro submit EXPERIMENT`` plans on the paper's hardware;
    with ``greedy``, the greedy search the evaluation offers instead (``repro evaluate --greedy``)."""
    spec = job_spec(experiment)
    settings = DecodeSettings(**spec.decode)

    def run(rules: Sequence[Rule], lengths: Sequence[int]) -> tuple[list[list[int]], list[Watch]]:
        model = ScriptedBatchModel(rules, [n + settings.max_len_offset + HANG_GUARD for n in lengths])
        outputs = translate_ids(model, _sources(lengths), settings, max_tokens=EVALUATION_MAX_TOKENS, greedy=greedy)
        return outputs, model.watch

    return Searcher(settings, f"the evaluation's {'greedy ' if greedy else ''}search (translate_ids, cached, batched) "
                              f"with job {spec.name}'s settings", run)


class _Script:
    """One sentence's rule for an adapter's ``search``, counting what it is asked."""

    def __init__(self, rule: Rule, limit: int, watch: Watch) -> None:
        self.rule, self.limit, self.watch = rule, limit, watch

    def __call__(self, prefix: tuple[int, ...]) -> Tensor:
        dist = self.watch.ask(self.rule, tuple(prefix), self.limit)
        return dist if isinstance(dist, Tensor) else log_probs(dist)


def adapter_searcher(claim: Claim, ctx: CheckContext) -> Searcher:
    """Another implementation's search (its adapter's ``search``), one sentence at a time, with the
    settings its ``hyperparameters()`` report for this claim (``params.settings``: ``translation``
    or ``parsing``), else the claim's own (said so)."""
    prefix = "parser_" if claim.params.get("settings", "translation") == "parsing" else ""
    keys = {"beam_size": f"{prefix}beam_size", "alpha": f"{prefix}length_penalty",
            "max_len_offset": f"{prefix}max_len_offset"}
    try:
        reported = ctx.target.hyperparameters()
    except NotApplicable:
        reported = {}
    values, notes, given = {}, [], set()
    for field_name, key in keys.items():
        value = reported.get(key)
        value = value[0] if isinstance(value, tuple) else value
        if value is None:
            value = claim.params[field_name]
            notes.append(f"{field_name} {value} given by the claim ({ctx.target.name} reports no '{key}')")
            given.add(field_name)
        values[field_name] = value
    settings = DecodeSettings(**values)

    def run(rules: Sequence[Rule], lengths: Sequence[int]) -> tuple[list[list[int]], list[Watch]]:
        watches = [Watch() for _ in rules]
        outputs = [ctx.target.search(_Script(rule, n + settings.max_len_offset + HANG_GUARD, watch), n, VOCAB,
                                     beam_size=settings.beam_size, alpha=settings.alpha,
                                     max_len_offset=settings.max_len_offset)
                   for rule, n, watch in zip(rules, lengths, watches)]
        return outputs, watches

    return Searcher(settings, f"{ctx.target.name}'s search", run, notes, frozenset(given))


def searcher(claim: Claim, ctx: CheckContext) -> Searcher:
    """The search the claim watches: repro's evaluation with the job's settings
    (``params.experiment``), or another implementation's adapter."""
    if watches_jobs(ctx, "search"):
        return evaluation_searcher(claim.params.get("experiment", "table2-base-ende"))
    return adapter_searcher(claim, ctx)


def checked_outputs(outputs: Any, count: int) -> list[list[int]]:
    """The search's outputs, one token list per sentence (no NaN can hide in token ids, but a
    missing or extra sentence can)."""
    if len(outputs) != count:
        raise ValueError(f"the search returned {len(outputs)} outputs for {count} sentences")
    return [list(map(int, finite(list(o), "an output"))) for o in outputs]


__all__ = ["BOS", "EOS", "FILLER", "VOCAB", "ScriptedBatchModel", "Searcher", "Watch", "adapter_searcher",
           "checked_outputs", "evaluation_searcher", "log_probs", "searcher"]
