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
import repro.model.attention as attention
import repro.train.loss as loss_module
from repro.train.compiled import COMPILATIONS, COMPILE_MIN_UPDATES, CompiledObjective, CompileWatch, at_least_two, compiles
from repro.train.config import TrainConfig
from repro.train.loss import TranslationLoss
from tests.train.cuda_like_attention import cuda_like_sdpa
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
    launch = loop.Trainer.launch
    monkeypatch.setattr(loop.Trainer, "launch", lambda self, micro, step: (
        shapes.extend((b.src.size(0), b.src.size(1), b.tgt_in.size(1)) for b in micro), launch(self, micro, step))[1])
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


@pytest.fixture
def cuda_entry(monkeypatch):
    """ATen's CUDA entry to the fused attention (its stride guard) in place of the CPU's."""
    monkeypatch.setattr(attention.F, "scaled_dot_product_attention", cuda_like_sdpa)


def _fused_objective(vocab: int = 40) -> TranslationLoss:
    torch.manual_seed(0)
    cfg = tiny_config("unused", vocab_size=vocab).model_config(vocab).replace(attention="fused")
    return TranslationLoss(Transformer(cfg).eval(), 0.1, impl="dense")


_dense = loss_module.dense_projection_loss


def _bool_mask_bias(mask, dtype):
    return mask   # what fused_attention handed the kernel before: the boolean mask itself


@pytest.mark.parametrize("aligned", [True, False])
def test_source_lengths_on_both_sides_of_a_multiple_of_8_compile_once(graphs, cuda_entry, monkeypatch,
                                                                      aligned: bool) -> None:
    """The H200's second compilation, on the CPU: a pass of 16 source tokens, then one of 13. The mask
    as an aligned bias answers ATen's stride question the same way for every length; the boolean mask
    of before made it a guard on the length, which the second pass failed (its reason names it)."""
    if not aligned:
        monkeypatch.setattr(attention, "aligned_bias", _bool_mask_bias)
    objective = CompiledObjective(_fused_objective(), "eager")
    watch = CompileWatch()
    for i, (rows, src_len, tgt_len) in enumerate([(3, 16, 9), (3, 13, 11), (4, 21, 8), (2, 24, 16)]):
        loss, _, _ = objective(*_pass(rows, src_len, tgt_len, seed=i), torch.tensor(0.5))
        assert torch.isfinite(loss)
    if aligned:
        assert watch.graphs == graphs() == COMPILATIONS, watch.reasons()
        assert watch.reasons() == []
    else:
        assert watch.graphs > COMPILATIONS
        assert any("stride" in reason or "% 8" in reason or "Mod(" in reason for reason in watch.reasons()), \
            watch.reasons()


@pytest.mark.parametrize("form", ["kernel", "inductor"])
def test_the_gpu_stage_s_first_updates_compile_once(graphs, cuda_entry, monkeypatch, h100_job_data,
                                                    tmp_path: Path, form: str) -> None:
    """The job-path stage's own plan and data (repro submit table2-base-ende --cluster h100-x1: one pass
    of <= 32000 padded tokens from length buckets, the WMT sample with its 37000-word BPE), with the
    GPU path's settings that a CPU runs: bf16 autocast, fused attention, the prefetch thread; a
    one-layer model (the shapes are the job's, the widths need not be). Dynamo compiles one graph,
    with Eq. 1 as PyTorch's kernel (``kernel``) and as the math form a GPU's graph holds (``inductor``)."""
    from repro.train.prefetch import Prefetcher

    if form == "inductor":
        monkeypatch.setattr(attention, "INDUCTOR_FORM_DEVICES", frozenset({"cpu"}))
    monkeypatch.setattr(loop, "COMPILE_BACKEND", "eager")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    # The output layer over 37000 words is minutes of a CPU and asks no question of the shapes: a head over
    # 64 of them stands in (the passes, their lengths and the attention are the job's).
    monkeypatch.setattr(loss_module, "dense_projection_loss", lambda hidden, weight, target, **kw: _dense(
        hidden, weight[:64], target % 64, **{**kw, "pad_id": 0}))
    cfg, data = h100_job_data
    cfg = cfg.replace(model_overrides={**cfg.model_overrides, "n_layers": 1, "d_model": 16, "d_ff": 32, "n_heads": 2})
    assert cfg.batching == "buckets" and cfg.max_tokens_per_device == 32000
    trainer = loop.build(cfg, data.examples, data.vocab_size)
    assert trainer.precision.mixed and trainer.plan.accumulation == 1
    watch, source_lengths = CompileWatch(), set()
    batches = Prefetcher(trainer.batcher, trainer.accumulation, pin=False)   # a CPU has no page-locked memory
    try:
        for step in range(1, 5):
            micro, _ = next(batches)
            source_lengths.update(b.src.size(1) for b in micro)
            trainer.update(micro, step)
    finally:
        batches.close()
    assert {n % 8 == 0 for n in source_lengths} == {True, False}, source_lengths   # both sides of the guard
    assert watch.graphs == COMPILATIONS, watch.reasons()
