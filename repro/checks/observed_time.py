"""Section 5.2's training time observed on a run's own records (``repro check --run``, basis ``run``): "We
trained the base models for a total of 100,000 steps or 12 hours ... The big models were trained for
300,000 steps (3.5 days)".

A result of a run: the wall time of every session of it, as ``run.json`` records each session's
(``sessions[].step_time.total_s``, :mod:`repro.train.step_clock`), summed. It is the paper's figure only
for the paper's job run to its end on the paper's machine (one machine of 8 P100s): any other run
departs, saying what differs; a run whose sessions do not all record their time needs another run.
"""

from __future__ import annotations

from repro.checks.observed_data import on_paper_machine
from repro.checks.observed_records import run_steps, sessions, written_at_end
from repro.checks.registry import checker
from repro.claims.claim import Claim
from repro.claims.compare import finite
from repro.claims.outcome import CheckContext, Measurement, NotRun
from repro.observed.judge import judge, paper_job
from repro.train.config import TrainConfig


@checker("observed.train_time", audits=False, evidence="run")
def train_time(claim: Claim, ctx: CheckContext) -> Measurement:
    """The wall time the run's sessions trained, summed, in ``params.per_s`` seconds (3600: hours; 86400: days)."""
    files = ctx.target
    job = paper_job(claim, files)
    if files.interrupted is not None:
        raise written_at_end(files, "the wall time of the sessions the run's record does not list")
    found = sessions(files)
    untimed = next((i for i, s in enumerate(found) if (s.get("step_time") or {}).get("total_s") is None), None)
    if not found or untimed is not None:
        which = f"its session {untimed} (field 'sessions[{untimed}].step_time.total_s')" if found else "any session"
        raise NotRun(f"needs another run: {files.record_path} records no wall time for {which}")
    seconds = 0.0
    for i, session in enumerate(found):
        seconds += finite(session["step_time"]["total_s"], f"{files.record_path}: field 'sessions[{i}].step_time.total_s'")
    per, steps = float(claim.params["per_s"]), run_steps(files)
    value = round(seconds / per, 4)
    detail = (f"{len(found)} session(s) made {steps} updates in {seconds:,.1f} s of wall time = {value:g} "
              f"{claim.unit or ''}".rstrip())
    asked = TrainConfig.from_dict(files.train, source=f"{files.path}: the run's recipe").max_steps
    differs = [f"it ran {steps} of its {asked} updates"] if steps != asked else []
    if job is None or files.recipe_hash != job.recipe_hash:
        differs.append(f"its recipe is not the paper's {job.job if job else 'job'} (max_steps {asked})")
    off = [i for i, s in enumerate(found) if not on_paper_machine(s)]
    if off:
        differs.append(f"session(s) {', '.join(map(str, off))} trained elsewhere than on one machine of 8 P100s "
                       "(observed.hardware)")
    if differs:   # the time of another job, or on other hardware: not the paper's figure, whatever its number
        return Measurement(value, passed=False, departs=True, unit=claim.unit,
                           detail=f"{detail}; not comparable with the paper's: {'; '.join(differs)}")
    return judge(claim, value, detail, unit=claim.unit)
