"""The searches on a GPU: at most two host syncs per decoding step, whatever the number of sentences,
counted on the fake accelerator (issue 29's proxy). Before, the beam synchronised about twice per
live sentence per step (3,992 syncs at one line for a 24-sentence batch)."""

from __future__ import annotations

import pytest
import torch

from repro.decode import beam_search, greedy_decode
from repro.decode.stepper import Stepper
from tests.decode.test_search import make_model, make_src


def count_steps(monkeypatch) -> list[int]:
    steps = [0]
    original = Stepper.log_probs

    def counted(self, prefix):
        steps[0] += 1
        return original(self, prefix)

    monkeypatch.setattr(Stepper, "log_probs", counted)
    return steps


@pytest.mark.parametrize("sentences", [3, 24])
@pytest.mark.parametrize("search", ["beam", "greedy"])
def test_at_most_two_host_syncs_per_step(fake_gpu, monkeypatch, sentences: int, search: str) -> None:
    model = make_model(seed=0, eos_bias=-1.0).to("cuda")   # outputs of varied lengths, most not empty
    src = make_src(batch=sentences, seed=1).to("cuda")
    steps = count_steps(monkeypatch)
    fake_gpu.reset()
    if search == "beam":
        beam_search(model, src, beam_size=4, max_len_offset=10)
    else:
        greedy_decode(model, src, max_len_offset=10)
    syncs = fake_gpu.count("sync")
    assert steps[0] >= 5
    assert syncs <= 2 * steps[0] + 4, f"{syncs} syncs over {steps[0]} steps:\n{fake_gpu.report()}"


def test_the_device_search_finds_what_the_cpu_search_finds(fake_gpu) -> None:
    model, src = make_model(seed=0, eos_bias=0.5), make_src(seed=0)
    expected = beam_search(model, src, max_len_offset=10, return_hypotheses=True)
    got = beam_search(model.to("cuda"), src.to("cuda"), max_len_offset=10, return_hypotheses=True)
    assert [h.tokens for h in got] == [h.tokens for h in expected]
    assert [h.score for h in got] == pytest.approx([h.score for h in expected], abs=1e-5)
