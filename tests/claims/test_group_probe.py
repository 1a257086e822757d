"""The two-rank probe of the DDP claims never hangs: a group stuck on a collective one rank never
enters (ranks that took different numbers of passes) is stopped and named within its time limit."""

from __future__ import annotations

import time

import pytest
import torch.multiprocessing as mp

import repro.checks.group_probe as group_probe


def _stuck_rank(rank: int, *args) -> None:
    if rank == 1:
        time.sleep(3600)


@pytest.mark.skipif("fork" not in mp.get_all_start_methods(), reason="the stand-in rank is passed by fork")
def test_a_stuck_group_is_stopped_and_named(monkeypatch) -> None:
    monkeypatch.setattr(group_probe, "_rank", _stuck_rank)
    monkeypatch.setattr(group_probe, "RANKS_TIMEOUT_S", 2.0)
    began = time.monotonic()
    with pytest.raises(TimeoutError, match="did not finish within 2 s"):
        group_probe.observe_group(None, 0, [], [])
    assert time.monotonic() - began < 30
