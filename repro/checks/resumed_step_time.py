"""Section 5.2's step time as a resumed job stores it (:mod:`repro.train.step_clock`,
``step-time.steady-state``).

A requeued job resumes from its newest checkpoint and stores the step time of that run of the job.
The check trains a tiny model in two runs of the loop, the second resuming the first, each on a
clock that advances one second at every reading: every update then lasts exactly one second, and
everything around the updates (building, restoring, the first reading of the log) costs seconds
too. The resumed run's stored step time must be one second, over this run's updates only."""

from __future__ import annotations

import tempfile
from pathlib import Path

from repro.checks.jobs import own
from repro.checks.registry import checker
from repro.claims.claim import Claim
from repro.claims.outcome import CheckContext, Measurement
from repro.data.synthetic import SYNTHETIC, SyntheticCorpus
from repro.decode.settings import TRANSLATION
from repro.measures.measure_registry import Request, Trained, measure
from repro.runtime import Runtime
from repro.train.config import TrainConfig
from repro.train.loop import train


def _ticking() -> callable:
    now = [0.0]

    def clock() -> float:
        now[0] += 1.0
        return now[0]
    return clock


@checker("run.step_time_resumed")
def step_time_resumed(claim: Claim, ctx: CheckContext) -> Measurement:
    """The step time a resumed run stores: its steady updates' median, over its own updates.
    Measured: the stored seconds per update (each update lasts one second of the injected clock);
    a figure that counts start-up, the restore or the first run's updates reads otherwise."""
    own(ctx)
    first, total = int(claim.params.get("first", 4)), int(claim.params.get("steps", 12))
    corpus = SyntheticCorpus(sentences=24, length=6)
    with tempfile.TemporaryDirectory(prefix="repro-resumed-") as tmp:
        cfg = TrainConfig(dataset=SYNTHETIC, vocab_size=64, tokens_per_batch=40, max_tokens_per_device=40,
                          model_overrides={"n_layers": 1, "d_model": 16, "d_ff": 32, "n_heads": 2, "max_positions": 64},
                          max_steps=first, warmup_steps=4, checkpoint_every_steps=2, checkpoint_every_minutes=0,
                          out_dir=str(Path(tmp) / "run"), device="cpu", precision="fp32", compile="off", log_every=1)
        train(cfg, synthetic=corpus, clock=_ticking(), log=lambda _: None)
        resumed = train(cfg.replace(max_steps=total), synthetic=corpus, clock=_ticking(), log=lambda _: None).to_dict()
        found = measure(Trained(None, None, None, Runtime.device_only("cpu"), TRANSLATION, Path(tmp) / "run",
                                summary=resumed), Request(claim.id, "step-time.steady-state"))
    if found is None:
        return Measurement(None, False, f"the resumed run stored no step time (it resumed from "
                                        f"{resumed.get('resumed_from')}, ran to {resumed.get('steps')})")
    timing = found.extra["step_time"]
    counted = timing["updates"] == total - first and resumed.get("resumed_from") == first
    return Measurement(found.value, None if counted else False,
                       f"resumed from update {resumed.get('resumed_from')} to {resumed.get('steps')}: "
                       f"{timing['updates']} updates timed ({timing['steady_updates']} steady), stored "
                       f"{found.value} s per update, interval {list(found.ci95 or [])}; start-up "
                       f"{timing['startup_s']} s left out" + ("" if counted else "; not this run's updates"))
