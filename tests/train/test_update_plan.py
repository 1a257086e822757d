"""The update-size invariant of Section 5.1: ~25000 tokens per side per update, any GPU count."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from repro.errors import ConfigError
from repro.recipes import get_recipe
from repro.train.update_plan import UpdatePlan, plan_update

PAPER_TOKENS_PER_BATCH = get_recipe("base").train.tokens_per_batch  # Section 5.1: 25000 per side


def test_paper_p100_needs_no_accumulation() -> None:
    plan = plan_update(PAPER_TOKENS_PER_BATCH, 8, 3125)
    assert (plan.accumulation, plan.tokens_per_micro_batch, plan.tokens_per_update) == (1, 3125, 25000)


def test_one_cpu_accumulates() -> None:
    plan = plan_update(PAPER_TOKENS_PER_BATCH, 1, 4096)
    assert plan.accumulation == 7  # ceil(25000 / 4096)
    assert plan.tokens_per_update >= 25000 and plan.tokens_per_micro_batch <= 4096


@given(tokens=st.integers(1, 200_000), world=st.integers(1, 64), per_device=st.integers(1, 50_000))
def test_invariant_for_any_world_size(tokens: int, world: int, per_device: int) -> None:
    plan = plan_update(tokens, world, per_device)
    assert plan.tokens_per_micro_batch <= per_device                      # each pass fits
    assert tokens <= plan.tokens_per_update < tokens + plan.micro_batches  # the batch, rounded up
    assert plan.accumulation == 1 or world * (plan.accumulation - 1) * per_device < tokens  # minimal


@pytest.mark.parametrize("wrong", [
    UpdatePlan(25000, 1, 3125, accumulation=1),   # no accumulation: one pass far too big for a device
    UpdatePlan(25000, 8, 3125, accumulation=2),   # accumulating on 8 GPUs that hold the batch already
    UpdatePlan(25000, 2, 4096, accumulation=7),   # accumulation computed for one device, run on two
])
def test_wrong_plans_fail_the_check(wrong: UpdatePlan) -> None:
    with pytest.raises(ConfigError, match="update plan"):
        wrong.check()


def test_bad_input() -> None:
    with pytest.raises(ConfigError, match="world_size"):
        plan_update(25000, 0, 3125)


def test_accumulation_keeps_paper_tokens_per_update():
    # Paper: ~25000 tokens per side per update on 8 GPUs.
    assert plan_update(25000, 8, 3125).accumulation == 1
    assert plan_update(25000, 1, 3125).accumulation == 8
    assert plan_update(25000, 2, 4096).accumulation == 4  # 4*2*4096 = 32768 >= 25000 > 3*2*4096
    for world in (1, 2, 3, 8):
        steps = plan_update(25000, world, 2000).accumulation
        assert steps * world * 2000 >= 25000 > (steps - 1) * world * 2000
