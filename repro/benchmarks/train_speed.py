"""Training speed: repro's Transformer against ``torch.nn.Transformer``, side by side.

Both models have the base configuration (N=6, d_model=512, d_ff=2048, h=8, P_drop=0.1), one
37000-word embedding shared by source, target and the pre-softmax projection (Section 3.4),
Adam (0.9, 0.98, 1e-9) and label smoothing 0.1, on the same batch of ``--sentences`` x
``--length`` tokens per side (default 128 x 32 = 4096). The reference computes logits for
every target position and ``nn.CrossEntropyLoss(label_smoothing=0.1, ignore_index=PAD)``;
repro projects only non-padding positions, in chunks, with the gradient formed in place
(repro.train.loss). Both are stepped by the training loop's own update (repro.train.update_step: Eq. 3's
rate, the gradients, Adam). Steps alternate between the two so that both see the same machine load;
the speed-up is reported as the median and spread of the per-round ratios. The FLOP utilisation
is relative to the sustained fp32 matmul rate (repro.benchmarks.matmul_peak).

    python -m repro.benchmarks.train_speed [--steps 3] [--warmup 1] [--threads 2]
"""

from __future__ import annotations

import argparse
import math
import resource
import statistics
import time

import torch
from torch import nn

from repro.argtypes import OneLineParser, non_negative_int, positive_float, positive_int
from repro.benchmarks.machine import (
    environment,
    parse_benchmark_args,
    publish,
    ratio_spread,
    spread,
)
from repro.benchmarks.matmul_peak import matmul_gflops
from repro.data.batching import Batch
from repro.model import Transformer, count_parameters, get_preset
from repro.model.positional import sinusoidal_encoding
from repro.train.loss import TranslationLoss
from repro.train.optimizer import build_optimizer
from repro.train.schedule import PAPER_WARMUP_STEPS
from repro.train.update_step import update

PAD = 0


class ReferenceTransformer(nn.Module):
    """``torch.nn.Transformer`` with shared scaled embeddings, sinusoids and a tied projection."""

    def __init__(self, vocab: int, d_model: int, n_heads: int, n_layers: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model, padding_idx=PAD)
        nn.init.normal_(self.embed.weight, std=d_model**-0.5)
        self.register_buffer("pe", sinusoidal_encoding(1024, d_model), persistent=False)
        self.scale = math.sqrt(d_model)
        self.dropout = nn.Dropout(dropout)
        self.core = nn.Transformer(d_model, n_heads, n_layers, n_layers, d_ff, dropout, batch_first=True)

    def _embed(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.embed(tokens) * self.scale + self.pe[: tokens.size(1)])

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        causal = nn.Transformer.generate_square_subsequent_mask(tgt_in.size(1), device=tgt_in.device)
        hidden = self.core(self._embed(src), self._embed(tgt_in), tgt_mask=causal, tgt_is_causal=True,
                           src_key_padding_mask=src == PAD, tgt_key_padding_mask=tgt_in == PAD,
                           memory_key_padding_mask=src == PAD)
        return hidden @ self.embed.weight.t()  # tied pre-softmax projection


class ReferenceObjective(nn.Module):
    """The reference's training objective, called as the loop calls repro's: (loss x scale, NLL, tokens)."""

    def __init__(self, model: ReferenceTransformer, smoothing: float) -> None:
        super().__init__()
        self.model = model
        self.loss = nn.CrossEntropyLoss(label_smoothing=smoothing, ignore_index=PAD, reduction="sum")

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor, tgt_out: torch.Tensor,
                scale: float = 1.0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        logits = self.model(src, tgt_in)
        loss = self.loss(logits.view(-1, logits.size(-1)), tgt_out.reshape(-1))
        return loss * scale, loss.detach(), (tgt_out != PAD).sum()


def training_flops(model: Transformer, src_tokens: int, tgt_tokens: int) -> float:
    """Matmul FLOPs of one update (forward + backward = 3 x forward), attention scores excluded."""
    cfg = model.cfg
    d, f, n = cfg.d_model, cfg.d_ff, cfg.n_layers
    enc = n * (4 * d * d + 2 * d * f)
    dec = n * (8 * d * d + 2 * d * f)  # self-attention, cross-attention (K/V on the source side), FFN
    proj = d * cfg.tgt_vocab_size
    return 3 * 2 * (src_tokens * enc + tgt_tokens * (dec + proj))


def make_batch(sentences: int, length: int, vocab: int, seed: int = 0) -> Batch:
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, vocab, (sentences, length), generator=g)
    tgt = torch.randint(4, vocab, (sentences, length + 1), generator=g)
    return Batch(src, tgt[:, :-1].contiguous(), tgt[:, 1:].contiguous(), src.numel(), sentences * length)


def main(argv: list[str] | None = None) -> dict:
    parser = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=positive_int, default=3, help="measured steps per model")
    parser.add_argument("--warmup", type=non_negative_int, default=1, help="unmeasured steps per model first")
    parser.add_argument("--sentences", type=positive_int, default=128)
    parser.add_argument("--length", type=positive_int, default=32)
    parser.add_argument("--vocab", type=positive_int, default=37000)
    parser.add_argument("--attention", default="fused", choices=["fused", "reference"], help="repro's attention path")
    parser.add_argument("--layers", type=positive_int, default=None, help="override N (quick validation runs)")
    parser.add_argument("--peak-seconds", type=positive_float, default=5.0, help="how long the sustained matmul peak runs")
    args = parse_benchmark_args(parser, argv)
    torch.manual_seed(0)
    cfg = get_preset("base").model.replace(src_vocab_size=args.vocab, tgt_vocab_size=args.vocab, attention=args.attention,
                                           **({"n_layers": args.layers} if args.layers else {}))
    ours = Transformer(cfg)
    ref = ReferenceTransformer(args.vocab, cfg.d_model, cfg.n_heads, cfg.n_layers, cfg.d_ff, cfg.dropout)
    batch = make_batch(args.sentences, args.length, args.vocab)
    src, tgt_out = batch.src, batch.tgt_out
    tokens = batch.src_tokens + batch.tgt_tokens
    device = torch.device("cpu")

    def stepper(objective: nn.Module, model: nn.Module):
        optimizer, steps = build_optimizer(model), iter(range(1, 10**9))
        return lambda: update(objective, optimizer, [batch], device, step=next(steps), d_model=cfg.d_model,
                              warmup_steps=PAPER_WARMUP_STEPS).loss_per_token

    steppers = (("repro", stepper(TranslationLoss(ours, 0.1), ours)),
                ("torch.nn.Transformer", stepper(ReferenceObjective(ref, 0.1), ref)))
    timings: dict[str, list[dict[str, float]]] = {"repro": [], "torch.nn.Transformer": []}
    for i in range(args.warmup + args.steps):
        for name, fn in steppers:
            wall, cpu = time.perf_counter(), time.process_time()
            start_times = _rusage()
            fn()
            end_times = _rusage()
            if i >= args.warmup:
                timings[name].append({"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu,
                                      "sys": end_times[1] - start_times[1]})
    peak = matmul_gflops(seconds=args.peak_seconds)
    flops = training_flops(ours, int((src != PAD).sum()), int((tgt_out != PAD).sum()))
    out: dict = {"benchmark": "train_speed", **environment(args.note), "tokens_per_step": tokens,
                 "batch": f"{args.sentences} x {args.length} source + target tokens", "vocab": args.vocab,
                 "layers": cfg.n_layers, "attention": args.attention, "parameters": count_parameters(ours),
                 "matmul_peak_gflops": round(peak, 1),
                 "matmul_peak": f"sustained: median of back-to-back 2048^3 fp32 products over {args.peak_seconds:g} s",
                 "models": {}}
    for name, rows in timings.items():
        s = statistics.median(r["wall"] for r in rows)
        out["models"][name] = {
            "s_per_step": round(s, 3), "tokens_per_s": round(tokens / s, 1),
            "gflops": round(flops / s / 1e9, 1), "mfu_of_matmul_peak": round(flops / s / 1e9 / peak, 3),
            "sys_fraction_of_cpu": round(sum(r["sys"] for r in rows) / max(sum(r["cpu"] for r in rows), 1e-9), 3),
            "steps": len(rows), "s_per_step_spread": spread([r["wall"] for r in rows]),
        }
    out["speedup_spread"] = ratio_spread([r["wall"] for r in timings["torch.nn.Transformer"]],
                                         [r["wall"] for r in timings["repro"]])
    out["speedup_tokens_per_s"] = round(out["models"]["repro"]["tokens_per_s"]
                                        / out["models"]["torch.nn.Transformer"]["tokens_per_s"], 3)
    out["target_speedup"] = 1.15
    return publish(out, args.out)


def _rusage() -> tuple[float, float]:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime, r.ru_stime


if __name__ == "__main__":
    main()
