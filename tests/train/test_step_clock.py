"""The step time's split of a run (repro.train.step_clock): the first warm-up updates and those that
compiled are left out of the steady ones, whose median is the step time."""

from __future__ import annotations

import pytest

from repro.train.step_clock import StepClock, warmup_updates


def _clock(durations: list[float], compiled: set[int] = frozenset()) -> StepClock:
    """A clock that saw updates of ``durations`` seconds (those in ``compiled`` compiled), from time 10."""
    now, graphs = [10.0], [0]
    clock = StepClock(lambda: now[0], 0.0, compiles=lambda: graphs[0])
    for i, seconds in enumerate(durations):
        clock.start_update()
        now[0] += seconds
        graphs[0] += i in compiled
        clock.end_update()
    return clock


@pytest.mark.parametrize("updates", [2, 40, 100, 1000])
def test_every_warm_up_update_and_only_those_are_left_out(updates: int) -> None:
    warm = warmup_updates(updates)
    assert 1 <= warm < updates
    summary = _clock([5.0] * warm + [1.0] * (updates - warm)).summary()
    assert summary["warmup_updates"] == warm and summary["steady_updates"] == updates - warm
    assert summary["warmup_s"] == pytest.approx(5.0 * warm) and summary["steady_total_s"] == pytest.approx(updates - warm)
    assert summary["steady_s_per_update"] == 1.0 and summary["ci95_s"] == [1.0, 1.0]
    assert summary["startup_s"] == 10.0


def test_an_update_that_compiled_after_the_warm_up_is_not_steady() -> None:
    durations = [1.0] * 40
    durations[30] = 9.0
    summary = _clock(durations, compiled={30}).summary()
    assert summary["compile_updates"] == 1 and summary["compile_s"] == pytest.approx(9.0)
    assert summary["steady_updates"] == 40 - warmup_updates(40) - 1 and summary["steady_s_per_update"] == 1.0


def test_a_run_too_short_for_a_steady_update_has_no_step_time() -> None:
    summary = _clock([]).summary()
    assert summary["steady_updates"] == 0 and "steady_s_per_update" not in summary
