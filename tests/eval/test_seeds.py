"""The interval over seeds: Student's t on the seeds' spread combined with their bootstrap."""

from __future__ import annotations

import math

import pytest

from repro.eval.seeds import over_seeds, t975
from repro.eval.step_time_spread import spread

import pandas as pd


def test_over_seeds_combines_training_and_sampling_noise():
    s = over_seeds({1: 27.0, 2: 28.0, 3: 29.0}, [1.2, 1.2, 1.2])
    training = 4.303 * 1.0 / math.sqrt(3)  # t(0.975, 2) · s / √N
    sampling = 1.2 / math.sqrt(3)
    assert s.mean == 28.0 and s.stdev == 1.0
    assert s.half_width == pytest.approx(math.hypot(training, sampling))
    one = over_seeds({1: 27.0}, [1.5])
    assert one.ci95 == pytest.approx((25.5, 28.5))  # one seed: its own bootstrap interval
    assert t975(1) == 12.706 and t975(100) == 1.96


def test_step_time_spread_from_metrics():
    metrics = pd.DataFrame({"step": [0, 10, 20, 30, 40], "elapsed_s": [0.0, 5.0, 11.0, 16.0, 40.0]})
    s = spread(metrics)
    assert s.intervals == 4 and s.median == pytest.approx(0.55) and s.low == 0.5 and s.high == 2.4
    assert s.q1 <= s.median <= s.q3 and s.ci95[0] < s.median < s.ci95[1]
    assert spread(metrics.iloc[:1]) is None


@pytest.mark.parametrize("elapsed, named", [("inf", "field 'elapsed_s' is infinite"),
                                            ("soon", "field 'elapsed_s' is not a number"),
                                            ("nan", "field 'elapsed_s' is not a number")])
def test_a_step_time_from_a_log_that_holds_no_number_is_refused_naming_the_line(tmp_path, elapsed, named):
    """The stored step time's spread (Section 5.2) is never drawn from an ``inf`` or a word: before, the
    word was dropped silently and ``inf`` made the interval."""
    from repro.errors import ResultError
    from repro.eval.step_time_spread import spread_of_log
    log = tmp_path / "metrics.csv"
    log.write_text("step,elapsed_s\n1,0.5\n2,1.0\n3," + elapsed + "\n4,2.0\n")
    with pytest.raises(ResultError, match=rf"metrics.csv:4: {named}"):
        spread_of_log(log)
