"""The pytest plugin, run inline with ``pytester`` in a project that has no test files of ours."""

from __future__ import annotations

import pytest

import torch

from repro.audit.audit import auditable_claims
from tests.fake_accelerator import FakeAccelerator

if torch.distributed.is_available():
    # torch imports DTensor lazily (FLOP counting does). Imported first inside an inline run, pytester drops
    # it afterwards, and its next import fails: torch cannot register its operators twice.
    import torch.distributed.tensor  # noqa: F401

#: Claims an adapter with only ``attention`` runs: Eq. 1 on it, on every attention path it has
#: (by default the same function), the weighted sum of the values (through ``attention``, the
#: call of the protocol that takes values apart from keys), and Section 3.2.1's comparisons
#: measured on the implementation's attention function.
ATTENTION_ONLY = ("sec3.eq1.scaled-dot-product", "sec3.eq1.every-path", "sec3.attention.weighted-sum",
                  "sec3.2.1.additive.space", "sec3.2.1.additive.speed", "sec3.2.1.softmax-saturation")

USER_MODULE = '''
import math
import torch
from repro.audit.adapter import Adapter

class Paper(Adapter):
    name = "user attention"
    def attention(self, q, k, v, mask):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)

class ScaledLate(Paper):
    def attention(self, q, k, v, mask):
        s = (q @ k.transpose(-2, -1)).masked_fill(~mask, float("-inf"))
        return s.softmax(-1) / math.sqrt(q.shape[-1]) @ v

class Raises(Paper):
    def attention(self, q, k, v, mask):
        raise ValueError("no attention today")

def good():
    return Paper()

def bad():
    return ScaledLate()

def raises():
    return Raises()
'''


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(plugin_user_impl=USER_MODULE)
    return pytester


def test_one_test_per_claim_with_not_applicable_as_skipped(project: pytest.Pytester) -> None:
    result = project.runpytest("--repro-target", "plugin_user_impl:good", "-rs", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=len(ATTENTION_ONLY), skipped=len(auditable_claims()) - len(ATTENTION_ONLY))
    result.stdout.fnmatch_lines([
        "*section3.toml:*: sec3.sublayer.post-norm: not applicable: user attention does not expose "
        "encoder_layer (adapter method 'encoder_layer')",
    ])


def test_failure_shows_measured_expected_and_detail(project: pytest.Pytester) -> None:
    result = project.runpytest("--repro-target", "plugin_user_impl:bad", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=len(ATTENTION_ONLY), skipped=len(auditable_claims()) - len(ATTENTION_ONLY))
    result.stdout.fnmatch_lines([
        "*claim sec3.eq1.scaled-dot-product (Section 3.2.1, Eq. 1) FAILED against user attention",
        "*expected:  0*tolerance abs 1e-05*",
        "*measured:  *",
        "*detail:    max abs error*",
    ])


def test_raising_adapter_fails_naming_claim_and_method(project: pytest.Pytester) -> None:
    result = project.runpytest("--repro-target", "plugin_user_impl:raises", "-p", "no:cacheprovider", "-k", "sec3")
    sec3 = sum("sec3" in c.id for c in auditable_claims())
    result.assert_outcomes(failed=len(ATTENTION_ONLY), skipped=sec3 - len(ATTENTION_ONLY))
    result.stdout.fnmatch_lines([
        "*claim sec3.eq1.scaled-dot-product* ERROR against user attention",
        "*adapter method 'attention' of user attention raised ValueError: no attention today",
    ])


def test_torch_norm_first_breaks_post_norm_and_keywords_select(project: pytest.Pytester) -> None:
    result = project.runpytest(
        "--repro-target", "repro.audit.torch_adapter:adapter_norm_first", "-p", "no:cacheprovider",
        "-k", "post-norm or eq1 or causal",
    )
    # eq1 (on its one path too, and in the model: sec3.eq1.in-model) and the causal mask pass; post-norm
    # fails; torch exposes no decoder layer
    result.assert_outcomes(passed=4, failed=1, skipped=1)
    result.stdout.fnmatch_lines(["FAILED repro-audit/section3.toml::sec3.sublayer.post-norm -*"])


def test_without_target_the_plugin_adds_nothing(project: pytest.Pytester) -> None:
    project.makepyfile(test_own="def test_own(): pass")
    project.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_user_tests_run_beside_the_claims_and_marker_selects_claims(project: pytest.Pytester) -> None:
    project.makepyfile(test_own="def test_own(): pass")
    both = project.runpytest("--repro-target", "plugin_user_impl:good", "-p", "no:cacheprovider")
    both.assert_outcomes(passed=1 + len(ATTENTION_ONLY), skipped=len(auditable_claims()) - len(ATTENTION_ONLY))
    only = project.runpytest("--repro-target", "plugin_user_impl:good", "-p", "no:cacheprovider", "-m", "not repro_claim")
    only.assert_outcomes(passed=1)


def test_bad_target_is_a_usage_error(project: pytest.Pytester) -> None:
    result = project.runpytest("--repro-target", "plugin_user_impl:nothing_here", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--repro-target: target 'plugin_user_impl:nothing_here': module*has no attribute*"])


def test_the_device_option_runs_the_claims_there(project: pytest.Pytester) -> None:
    """``--repro-device cuda``: the same verdicts with the parts built on the (fake) device."""
    with FakeAccelerator() as fake:
        result = project.runpytest(
            "--repro-target", "repro.audit.torch_adapter:adapter_norm_first", "--repro-device", "cuda",
            "-p", "no:cacheprovider", "-k", "post-norm or eq1 or causal",
        )
    result.assert_outcomes(passed=4, failed=1, skipped=1)
    assert fake.count("host-to-device", "repro/audit/on_device.py") > 0


def test_bad_device_is_a_usage_error(project: pytest.Pytester) -> None:
    result = project.runpytest("--repro-target", "plugin_user_impl:good", "--repro-device", "gpu0",
                               "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--repro-device: device must be*got 'gpu0'*"])
