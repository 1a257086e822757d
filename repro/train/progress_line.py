"""The plain progress line training prints when stderr is not a terminal (a log file, a SLURM job).

A terminal gets tqdm's bar; a file would get one carriage-return-joined line, so instead the loop
prints, every :data:`EVERY_LOGGED` metrics rows (and at the last step), one line::

    repro train: step 1200/12000 (10%) | 5,310 tokens/s | loss 4.213 | lr 6.99e-04 | elapsed 3m41s | ETA 33m10s
"""

from __future__ import annotations

#: A plain line every this many logged steps (``log_every`` × 10 updates).
EVERY_LOGGED = 10


def duration(seconds: float) -> str:
    """``1h02m``, ``3m41s`` or ``12s``."""
    seconds = max(0, int(round(seconds)))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def progress_line(step: int, max_steps: int, tokens_per_s: float, loss: float, lr: float, elapsed_s: float,
                  steps_done: int) -> str:
    """One line: step, tokens/s, loss, learning rate, elapsed time and the ETA at this run's pace."""
    remaining = max(max_steps - step, 0)
    eta = elapsed_s / steps_done * remaining if steps_done > 0 else float("nan")
    pct = 100 * step / max_steps if max_steps else 100.0
    eta_text = duration(eta) if eta == eta else "?"
    return (f"repro train: step {step}/{max_steps} ({pct:.0f}%) | {tokens_per_s:,.0f} tokens/s | loss {loss:.3f} | "
            f"lr {lr:.2e} | elapsed {duration(elapsed_s)} | ETA {eta_text}")
