"""Teeth of the checks the issue-45 mistakes that had never been run (tests/mutations/issue45_rows.md)
led to: each fails on the class of mistake that escaped every claim before it, and passes on repro's
own code.

- ``sec5.batch.loss-normalisation.observed`` (strengthened): the share of an update's passes that is
  PAD, which the loop reports and logs with each update, is the share counted in the passes' tensors
  (the real tokens' share reported as the padding's passed: the claim compared the loss and the token
  counts the update reports, not its padding).
"""

from __future__ import annotations

from unittest import mock

import pytest

import repro.train.update_step as update_step
from repro.audit.repro_adapter import ReproAdapter
from repro.checks import CHECKERS, select_claims
from repro.claims import Outcome
from repro.claims.runner import run_claim
from repro.data.vocab import PAD

CLAIMS = {c.id: c for c in select_claims()}
REPORTED = "sec5.batch.loss-normalisation.observed"


def outcome(claim_id: str) -> Outcome:
    claim = CLAIMS[claim_id]
    return run_claim(claim, CHECKERS[claim.checker], ReproAdapter(), {}).status


def test_reported_padding_share_passes_on_repro():
    assert outcome(REPORTED) == Outcome.PASS


@pytest.mark.parametrize("share", [
    lambda micro, padding=update_step.padding: 1.0 - padding(micro),   # the real tokens' share
    lambda micro: sum(int((b.tgt_out == PAD).sum()) for b in micro) / sum(b.tgt_out.numel() for b in micro),
    lambda micro: float("nan"),
], ids=["inverted", "targets-only", "nan"])
def test_reported_padding_share_fails_when_the_update_reports_another(share):
    with mock.patch.object(update_step, "padding", share):
        assert outcome(REPORTED) == Outcome.FAIL
