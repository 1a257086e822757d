"""The compiled objective compiles a stated number of times (repro.train.compiled.COMPILATIONS) per run.

Counted with dynamo's counters; the "eager" backend traces exactly as inductor would, without
generating kernels. Each count is held against the plain ``torch.compile(dynamic=True)`` the loop used
before, on the same passes: it compiles more often (the bound has teeth). The shapes it brings the
passes to change neither the loss nor the gradients nor the token counts.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch._dynamo.utils import counters

import repro.train.loop as loop
from repro.data.vocab import BOS, EOS, PAD
from repro.model import Transformer
from repro.train.compiled import COMPILATIONS, COMPILE_MIN_UPDATES, CompiledObjective, at_least_two, compiles
from repro.train.config import TrainConfig
from repro.train.loss import TranslationLoss
from tests.train.test_loop import quiet, tiny_config


class PlainCompile(torch.nn.Module):
    """What build() did before: torch.compile(dynamic=True) and nothing else."""

    def __init__(self, objective: torch.nn.Module, backend: str) -> None:
        super().__init__()
        self.compiled = torch.compile(objective, dynamic=True, backend=backend)

    def forward(self, *args):
        return self.compiled(*args)


@pytest.fixture
def graphs():
    torch._dynamo.reset()
    counters.clear()
    yield lambda: counters["stats"]["unique_graphs"]
    torch._dynamo.reset()


def _objective(vocab: int = 40) -> TranslationLoss:
    torch.manual_seed(0)
    cfg = tiny_config("unused", vocab_size=vocab).model_config(vocab)
    model = Transformer(cfg)
    model.eval()   # no dropout: the padded pass must give the same numbers
    return TranslationLoss(model, 0.1, impl="dense")


def _pass(rows: int, src_len: int, tgt_len: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A pass of ``rows`` sentences, the first of each length, the others shorter (PAD after)."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, 40, (rows, src_len), generator=g)
    tgt = torch.randint(4, 40, (rows, tgt_len), generator=g)
    if src_len > 1:
        src[1:, -1] = PAD
    tgt_out = tgt.clone()
    tgt_out[:, -1] = EOS
    tgt_in = torch.cat([torch.full((rows, 1), BOS), tgt[:, :-1]], 1)
    return src, tgt_in, tgt_out


SHAPES = [(3, 9, 9), (3, 9, 12), (1, 5, 6), (4, 1, 7), (5, 6, 1)]


@pytest.mark.parametrize("wrapper", [CompiledObjective, PlainCompile])
def test_passes_of_every_shape_compile_once(graphs, wrapper) -> None:
    """Equal lengths first (duck shaping), then unequal; one sentence; one-token sides (0/1 specialisation)."""
    objective = wrapper(_objective(), "eager")
    # the plain compile: the first two passes are enough to compile twice (the run below shows 0/1)
    for i, shape in enumerate(SHAPES if wrapper is CompiledObjective else SHAPES[:2]):
        loss, nll, tokens = objective(*_pass(*shape, seed=i), torch.tensor(0.5))
        assert torch.isfinite(loss) and int(tokens) == shape[0] * shape[2]
    if wrapper is CompiledObjective:
        assert graphs() == COMPILATIONS == 1
    else:
        assert graphs() > COMPILATIONS   # what the bound is held against: the plain compile specialises


@pytest.mark.parametrize("shape", [(1, 5, 6), (4, 1, 7), (1, 1, 1), (3, 4, 1)])
def test_the_added_rows_and_columns_weigh_nothing(shape) -> None:
    objective = _objective()
    batch = _pass(*shape)
    padded = at_least_two(*batch)
    assert all(t.size(0) >= 2 and t.size(1) >= 2 for t in padded)
    assert padded[0].size(0) == padded[1].size(0) == padded[2].size(0)
    results = []
    for tensors in (batch, padded):
        objective.zero_grad()
        loss, nll, tokens = objective(*tensors, 0.5)
        loss.backward()
        grads = {n: p.grad.clone() for n, p in objective.named_parameters() if p.grad is not None}
        results.append((loss.detach(), nll, int(tokens), grads))
    (loss, nll, tokens, grads), (loss2, nll2, tokens2, grads2) = results
    assert tokens2 == tokens and torch.isfinite(loss2)
    torch.testing.assert_close(loss2, loss, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(nll2, nll, rtol=1e-5, atol=1e-6)
    assert grads2.keys() == grads.keys()
    for name in grads:
        torch.testing.assert_close(grads2[name], grads[name], rtol=1e-4, atol=1e-6, msg=name)


def test_bringing_a_pass_to_shape_never_syncs(fake_gpu) -> None:
    device = torch.device("cuda")
    tensors = [t.to(device) for t in _pass(1, 1, 1)]
    fake_gpu.reset()
    padded = at_least_two(*tensors)
    assert [tuple(t.shape) for t in padded] == [(2, 2), (2, 2), (2, 2)]
    assert fake_gpu.count("sync") == 0, fake_gpu.report()


@pytest.mark.parametrize("bounded", [True, False])
def test_a_run_on_real_text_compiles_within_the_bound(graphs, monkeypatch, bounded: bool, tiny_multi30k,
                                                      tmp_path: Path) -> None:
    """100 updates of the real batcher on Multi30k: passes of every shape, one-sentence passes among them.
    The loop as it is compiles once, with no graph break; the plain compile of before compiles again."""
    monkeypatch.setattr(loop, "COMPILE_BACKEND", "eager")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))   # build() points inductor there
    if not bounded:
        monkeypatch.setattr(loop, "CompiledObjective", PlainCompile)
    shapes: list[tuple[int, int, int]] = []
    update = loop.Trainer.update
    monkeypatch.setattr(loop.Trainer, "update", lambda self, micro, step: (
        shapes.extend((b.src.size(0), b.src.size(1), b.tgt_in.size(1)) for b in micro), update(self, micro, step))[1])
    data = tiny_multi30k(tmp_path / "data", {"train": 600, "dev": 4, "test": 4})
    cfg = TrainConfig(dataset=str(data), vocab_size=300, tokens_per_batch=300, max_tokens_per_device=300,
                      max_steps=100, warmup_steps=10, max_len=60, checkpoint_every_steps=0,
                      checkpoint_every_minutes=0, keep_checkpoints=5, average_last=1, out_dir=str(tmp_path / "run"),
                      device="cpu", log_every=1000, compile="on", precision="fp32", threads=1,
                      model_overrides={"n_layers": 1, "d_model": 32, "d_ff": 64, "n_heads": 4, "attention": "fused"})
    summary = loop.train(cfg, log=quiet)
    assert summary.steps == 100 and len(set(shapes)) > 20 and any(rows == 1 for rows, _, _ in shapes)
    assert dict(counters["graph_break"]) == {}
    if bounded:
        assert graphs() == COMPILATIONS
    else:
        assert graphs() > COMPILATIONS


def test_auto_compiles_on_a_gpu_only_a_run_long_enough_to_earn_it_back() -> None:
    """A paper job (100k updates) compiles on a GPU; the local main job (1000) and a reduced job do
    not (on an H200 compiling cost minutes of a 3-minute job); ``on`` and ``off`` are obeyed."""
    assert compiles("auto", True, 100_000) and compiles("auto", True, COMPILE_MIN_UPDATES)
    assert not compiles("auto", True, 1000) and not compiles("auto", True, COMPILE_MIN_UPDATES - 1)
    assert not compiles("auto", False, 100_000)
    assert compiles("on", False, 10) and not compiles("off", True, 10**6)
