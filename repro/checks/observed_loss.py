"""Section 5.4's label smoothing observed on the loss a run computed (``repro check --run``, basis ``run``):
"During training, we employed label smoothing of value eps_ls = 0.1".

The metrics log keeps, for each logged update, the loss the run minimised and its NLL, both per target
token (:mod:`repro.train.loss`). With the target distribution of that loss (``1 - eps`` on the reference,
``eps`` spread over the ``K = V - 2`` tokens that are neither it nor PAD) the loss of a position is
``(1 - eps) * NLL + eps * U``, ``U`` the mean of ``-log p`` over those ``K`` tokens, so that

    loss - NLL = eps * (U - NLL),   with U >= log K   (Jensen: the K probabilities sum to at most 1).

So the two logged figures bound the smoothing the loss computed, whatever ``U`` was: where ``NLL < log K``,
``eps <= (loss - NLL) / (log K - NLL)``; where ``NLL > log K``, ``eps >= (loss - NLL) / (log K - NLL)``;
and ``eps = 0`` exactly when the loss is the NLL. The smoothing each part of the run asked for
(:func:`repro.checks.observed_training.part_configs`) must lie within the bounds of its logged updates:
a recipe of 0.1 whose loss is its NLL, or whose loss allows at most 0.05, did not smooth as it says (fail).
"""

from __future__ import annotations

import math

from repro.checks.observed_records import logged_rows
from repro.checks.observed_training import config_at, part_configs
from repro.checks.registry import checker
from repro.claims.claim import Claim
from repro.claims.compare import finite
from repro.claims.outcome import CheckContext, Contradiction, Measurement, NotRun
from repro.observed.history import changes
from repro.observed.judge import paper_job

#: Loss and NLL are logged to 6 decimals: two figures this close are one number.
SAME = 2e-6
#: Rows whose NLL lies this close to log K bound nothing (the bound divides by their difference).
MARGIN = 0.05
#: Slack on a bound for the rounding of the logged figures.
SLACK = 1e-4


def _bounds(d: float, nll: float, log_k: float) -> tuple[float, float]:
    """(lowest, highest) eps_ls that a position-mean loss - NLL of ``d`` at ``nll`` allows (module docstring)."""
    gap = log_k - nll
    if abs(gap) < MARGIN:
        return 0.0, math.inf
    return (0.0, d / gap) if gap > 0 else (max(d / gap, 0.0), math.inf)


@checker("observed.label_smoothing_loss", audits=False, evidence="run")
def label_smoothing_loss(claim: Claim, ctx: CheckContext) -> Measurement:
    """The smoothing of the loss the run logged, bounded by its loss and NLL at every logged update, against
    the smoothing each part of the run asked for (module docstring)."""
    files = ctx.target
    paper_job(claim, files)
    rows = [r for r in logged_rows(files) if r.loss is not None or r.nll is not None]
    if not rows:
        raise NotRun(f"needs another run: {files.metrics_path} keeps no loss and NLL of its updates (a log written "
                     "before they were kept): the loss the run computed cannot be read")
    if files.newest is None:
        raise NotRun(f"needs another run: {files.path / 'checkpoints'} holds no checkpoint (the model's vocabulary)")
    vocab = int(files.newest.model_config.get("tgt_vocab_size") or files.newest.model_config["src_vocab_size"])
    log_k, configs = math.log(vocab - 2), part_configs(files)
    low, high, smoothed = 0.0, math.inf, False
    for row in rows:
        where = f"{files.metrics_path} line {row.line} (step {row.step})"
        loss, nll = (finite(v, f"{where}: {k}") if v is not None else None for k, v in (("loss", row.loss),
                                                                                          ("nll", row.nll)))
        if loss is None or nll is None:
            raise Contradiction(f"{where}: field '{'nll' if nll is None else 'loss'}' is empty, but the row logs the "
                                f"{'loss' if nll is None else 'NLL'}", loss if nll is None else nll)
        eps = config_at(configs, row.step).label_smoothing
        same = abs(loss - nll) <= SAME
        lo, hi = (0.0, 0.0) if same else _bounds(loss - nll, nll, log_k)
        smoothed |= not same
        if (eps == 0) != same or not lo - SLACK <= eps <= hi + SLACK:
            said = ("the loss is its NLL: no smoothing" if same else "the loss is not its NLL: it smoothed" if eps == 0
                    else f"the loss allows eps_ls {'at most' if lo == 0.0 else 'at least'} {hi if lo == 0.0 else lo:.4g}")
            raise Contradiction(f"{where}: loss {loss!r}, NLL {nll!r} ({said}, with NLL {'below' if nll < log_k else 'above'} "
                                f"log {vocab - 2} = {log_k:.4f}), but the run's recipe smooths with label_smoothing "
                                f"{eps}", loss)
        low, high = max(low, lo), min(high, hi)
    value = [round(low, 4), None if math.isinf(high) else round(high, 4)]
    shown = f"between {value[0]} and {value[1]}" if value[1] is not None else f"at least {value[0]}"
    detail = (f"the loss and NLL of {len(rows)} logged updates allow eps_ls {shown}" if smoothed else
              f"the loss is the NLL at all {len(rows)} logged updates: eps_ls 0") + f" (V = {vocab})"
    changed = changes(files, ("label_smoothing",))
    if changed:
        return Measurement(value, passed=False, departs=True, detail=f"{detail}; {'; '.join(changed)}")
    asked = config_at(configs, rows[-1].step).label_smoothing
    detail = f"{detail}, which holds the run's label_smoothing {asked}"
    if asked == claim.expected:   # the paper's smoothing, and the loss the run computed allows it
        return Measurement(value, passed=True, detail=detail)
    return Measurement(value, passed=False, departs=True, detail=f"{detail}; the run was asked for it: label_smoothing "
                       f"{asked} (the paper: {claim.expected})")
