"""Eq. 3: lrate = d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)."""

import math

import pytest
import torch

from repro.train.schedule import learning_rate, set_learning_rate

# Values worked out by hand for d_model = 512, warmup = 4000.
EXPECTED = {
    1: 512**-0.5 * 4000**-1.5,          # 1.746928e-07
    1000: 512**-0.5 * 1000 * 4000**-1.5,
    4000: 512**-0.5 * 4000**-0.5,       # the peak, 6.987712e-04
    16000: 512**-0.5 * 16000**-0.5,     # half the peak: inverse square root decay
    100000: 512**-0.5 * 100000**-0.5,
}


@pytest.mark.parametrize("step, value", sorted(EXPECTED.items()))
def test_eq3_at_given_steps(step, value):
    assert learning_rate(step, 512, 4000) == pytest.approx(value, rel=1e-12)


def test_eq3_known_numbers():
    assert learning_rate(4000, 512, 4000) == pytest.approx(6.987712429686844e-04, rel=1e-9)
    assert learning_rate(1, 512, 4000) == pytest.approx(1.7469281074217108e-07, rel=1e-9)
    assert learning_rate(16000, 512, 4000) == pytest.approx(learning_rate(4000, 512, 4000) / 2)


def test_linear_warmup_then_inverse_sqrt():
    lrs = [learning_rate(s, 512, 4000) for s in range(1, 12001)]
    peak = max(range(len(lrs)), key=lrs.__getitem__) + 1
    assert peak == 4000
    assert lrs[1999] == pytest.approx(2 * lrs[999])          # linear before warm-up ends
    assert lrs[8999] == pytest.approx(lrs[3999] * math.sqrt(4000 / 9000))


def _wrong_eq3(step, d_model, warmup):  # warm-up exponent -0.5 instead of -1.5
    return d_model**-0.5 * min(step**-0.5, step * warmup**-0.5)


def test_check_catches_a_wrong_exponent():
    assert any(abs(_wrong_eq3(s, 512, 4000) - v) > 1e-3 * v for s, v in EXPECTED.items())


def test_step_zero_is_refused_and_rate_is_applied():
    with pytest.raises(ValueError):
        learning_rate(0, 512)
    opt = torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))], lr=0.0)
    set_learning_rate(opt, 0.25)
    assert opt.param_groups[0]["lr"] == 0.25
