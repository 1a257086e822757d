"""One-line mistakes in the code that produces the paper's numbers, and whether `repro check` sees them.

Each mutation replaces one line of repro's source (the model, the loss, the batcher, the training
loop, the search, the averaging, the BLEU protocol, the recipes of Table 3) with a plausible wrong
version, in a copy of the package, and runs `repro check` on the copy. The second group (issue 28)
holds one mutant for each way a check could be fooled: NaN, a value fed by the claim instead of
observed on what runs, a path no claim watched, half a check. A mutation is *caught* when `repro check` exits
non-zero. This is not a test of the suite (it takes minutes): it measures how much of what would
change a reproduction's numbers the claims notice, and its output is committed as
reports/mutations.json.

    python tests/mutations/run.py [--out reports/mutations.json] [--only NAME] [--append] [--claims PREFIX]
    python tests/mutations/run.py --suite [--only NAME]

The machinery's mistakes (``SUITE_MUTATIONS``: the CLI, records, locks, benchmarks) are caught by the
test suite instead: ``--suite`` runs each one's test files on a copy of the project with the mistake in.

A row added with ``--append`` carries the commit it ran at (``commit``); the record's own
``commit`` is that of the full run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Mutation:
    name: str
    file: str
    old: str
    new: str
    what: str
    #: why the mistake cannot change a number on the paper's code path (a survivor that is no gap);
    #: its row then says so under ``equivalent``
    equivalent: str = field(default="", kw_only=True)


@dataclass(frozen=True)
class SuiteMutation(Mutation):
    """A mistake in the machinery (CLI, files, records, locks, benchmarks): the test files ``tests`` must
    fail on it (``--suite``); ``repro check`` is not asked."""

    tests: tuple[str, ...] = ()


MUTATIONS = [
    Mutation("scale-after-softmax", "repro/model/attention.py",
             "    weights = scores.softmax(dim=-1)", "    weights = (scores * math.sqrt(d_k)).softmax(dim=-1) / math.sqrt(d_k)",
             "Eq. 1 scaled after the softmax instead of before"),
    Mutation("no-scaling", "repro/model/attention.py",
             "    scores = query @ key.transpose(-2, -1) / math.sqrt(d_k)", "    scores = query @ key.transpose(-2, -1)",
             "dot products not scaled by 1/sqrt(d_k)"),
    Mutation("causal-mask-leaks", "repro/model/masks.py",
             "    return torch.ones(length, length, dtype=torch.bool, device=device).tril()[None, None]",
             "    return torch.ones(length, length, dtype=torch.bool, device=device).tril(1)[None, None]",
             "the decoder's mask lets position i see i + 1"),
    Mutation("no-padding-mask", "repro/model/masks.py",
             "    return (tokens != pad_id)[:, None, None, :]", "    return (tokens == tokens)[:, None, None, :]",
             "no padding mask anywhere"),
    Mutation("cross-attention-ignores-source-padding", "repro/model/layers.py",
             "            x, lambda y: self.cross_attn(y, memory, memory, src_mask, cache=cross_cache, static_kv=True)",
             "            x, lambda y: self.cross_attn(y, memory, memory, None, cache=cross_cache, static_kv=True)",
             "encoder-decoder attention ignores source padding"),
    Mutation("cached-step-sees-too-far", "repro/model/transformer.py",
             "            tgt_mask = torch.ones(length, offset + length, dtype=torch.bool, device=tgt_in.device).tril(offset)[None, None]",
             "            tgt_mask = torch.ones(length, offset + length, dtype=torch.bool, device=tgt_in.device).tril(offset + 1)[None, None]",
             "a multi-position cached decoding step sees one position too far"),
    Mutation("pre-norm", "repro/model/layers.py",
             "        return self.norm(x + self.dropout(y := sublayer(x))).to(y.dtype)", "        return x + self.dropout(sublayer(self.norm(x)))",
             "pre-norm: x + Dropout(Sublayer(LayerNorm(x)))"),
    Mutation("norm-before-residual", "repro/model/layers.py",
             "        return self.norm(x + self.dropout(y := sublayer(x))).to(y.dtype)", "        return x + self.norm(self.dropout(sublayer(x)))",
             "LayerNorm applied to the sub-layer before the residual sum"),
    Mutation("no-sublayer-dropout", "repro/model/layers.py",
             "        return self.norm(x + self.dropout(y := sublayer(x))).to(y.dtype)", "        return self.norm(x + (y := sublayer(x))).to(y.dtype)",
             "no dropout on the sub-layer outputs"),
    Mutation("no-embedding-dropout", "repro/model/transformer.py",
             "        return self.embed_dropout(embed(tokens) + pos(tokens.size(1), offset))",
             "        return embed(tokens) + pos(tokens.size(1), offset)",
             "no dropout on the sums of embeddings and positional encodings"),
    Mutation("unscaled-embedding", "repro/model/embedding.py",
             "        return self.lut(tokens) * self.scale", "        return self.lut(tokens)",
             "embeddings not multiplied by sqrt(d_model)"),
    Mutation("sin-cos-swapped", "repro/model/positional.py",
             "    pe[:, 0::2] = torch.sin(position * inv_freq)", "    pe[:, 0::2] = torch.cos(position * inv_freq)",
             "cos on the even dimensions (sin/cos swapped)"),
    Mutation("gelu-ffn", "repro/model/feedforward.py",
             "        return self.w_2(self.w_1(x).relu())",
             "        return self.w_2(nn.functional.gelu(self.w_1(x)))", "GELU instead of ReLU in Eq. 2"),
    Mutation("untied-projection", "repro/model/transformer.py",
             "            self.output_projection.weight = self.tgt_embed.weight", "            pass",
             "the pre-softmax projection not tied to the embeddings"),
    Mutation("loss-gradient-without-smoothing", "repro/train/loss.py",
             "                z.scatter_add_(1, y[:, None], z.new_full((y.numel(), 1), -(1.0 - epsilon - off)))",
             "                z.scatter_add_(1, y[:, None], z.new_full((y.numel(), 1), -(1.0 - off)))",
             "the fused loss forms its gradient without the smoothing"),
    Mutation("loss-gives-pad-mass", "repro/train/loss.py",
             "                z[:, pad_id] += off", "                pass",
             "the fused loss's target gives PAD probability mass"),
    Mutation("targets-not-shifted", "repro/data/batching.py",
             "    tgt_in[:, 1:][body] = tgt_ids",
             "    tgt_in[:, :-1][body] = tgt_ids",
             "decoder input not shifted right (it holds the targets)"),
    Mutation("no-label-smoothing-in-recipe", "repro/train/config.py",
             "    label_smoothing: float = 0.1       # Section 5.4", "    label_smoothing: float = 0.0       # Section 5.4",
             "the recipe trains without label smoothing"),
    Mutation("adam-beta2", "repro/train/config.py",
             "    adam_beta2: float = 0.98", "    adam_beta2: float = 0.999", "Adam's beta2 left at PyTorch's 0.999"),
    Mutation("rate-one-step-late", "repro/train/loop.py",
             "        return launch_update(self.objective, self.optimizer, micro, self.device, step=step,",
             "        return launch_update(self.objective, self.optimizer, micro, self.device, step=max(step - 1, 1),",
             "the loop applies Eq. 3 one update late (the peak lands at update 4001)"),
    Mutation("checkpoints-every-10-seconds", "repro/train/cadence.py",
             "        by_time = bool(self.every_minutes) and self.clock() - self._since >= 60 * self.every_minutes",
             "        by_time = bool(self.every_minutes) and self.clock() - self._since >= self.every_minutes",
             "the checkpoint interval read in seconds, not minutes"),
    Mutation("length-penalty-y-alpha", "repro/decode/beam.py",
             "    return ((5.0 + length) / 6.0) ** alpha", "    return length ** alpha",
             "the GNMT length penalty replaced by |Y|^alpha"),
    Mutation("beam-with-dropout", "repro/decode/beam.py", "    model.eval()", "    model.train()",
             "beam search run with dropout on"),
    Mutation("output-limit-off-by-one", "repro/decode/beam.py",
             "        forced = limit[active] <= step                               # length limit: only EOS may follow",
             "        forced = limit[active] < step                               # length limit: only EOS may follow",
             "the output may run one token past input + 50"),
    Mutation("average-first-k", "repro/train/average.py",
             "    return write_average(paths[-k:], output, device, allow_no_lineage=allow_no_lineage)",
             "    return write_average(paths[:k], output, device, allow_no_lineage=allow_no_lineage)",
             "averaging the first k checkpoints instead of the last"),
    Mutation("average-over-k-plus-one", "repro/train/average.py",
             "    return {k: (v / len(states)).to(first[k].dtype) if first[k].is_floating_point() else v for k, v in total.items()}",
             "    return {k: (v / (len(states) + 1)).to(first[k].dtype) if first[k].is_floating_point() else v for k, v in total.items()}",
             "dividing the sum of k checkpoints by k + 1"),
    Mutation("no-compound-split", "repro/eval/bleu.py",
             '    return _COMPOUND.sub(r"\\1 ##AT##-##AT## \\2", line)', "    return line",
             "the BLEU compound split removed"),
    # -- issue 28: the holes a check could be fooled through ----------------------------------------
    Mutation("nan-attention", "repro/model/attention.py",
             "    return weights @ value, weights", '    return (weights @ value) * float("nan"), weights',
             "Eq. 1 returns NaN (max(0.0, nan) is 0.0: a worst-error loop read it as exact)"),
    Mutation("nan-positional-table", "repro/model/positional.py",
             "    pe[:, 0::2] = torch.sin(position * inv_freq)", '    pe[:, 0::2] = torch.sin(position * inv_freq) * float("nan")',
             "the sinusoid table holds NaN"),
    Mutation("nan-logits", "repro/model/transformer.py",
             "        return self.output_projection(hidden)", '        return self.output_projection(hidden) * float("nan")',
             "the model's logits are NaN (masks, padding and the cache compared NaN with NaN)"),
    Mutation("kv-cache-not-reordered", "repro/model/attention.py",
             "            self.key[:, :, :self.length] = self.keys().index_select(0, index)",
             "            self.key[:, :, :self.length] = self.keys()",
             "the beam's key cache keeps its rows when the hypotheses are reordered"),
    Mutation("search-cache-sorted", "repro/decode/stepper.py",
             "            self.cache.reorder(index)", "            self.cache.reorder(index.sort().values)",
             "the search reorders its cache to the surviving rows in sorted order, not the hypotheses' order"),
    Mutation("decoder-sees-only-itself", "repro/model/masks.py",
             "    return torch.ones(length, length, dtype=torch.bool, device=device).tril()[None, None]",
             "    return torch.eye(length, dtype=torch.bool, device=device)[None, None]",
             "each decoder position attends to itself only (no leak: the first half of the causal claim passed it)"),
    Mutation("decoder-local-window", "repro/model/masks.py",
             "    return torch.ones(length, length, dtype=torch.bool, device=device).tril()[None, None]",
             "    return (torch.ones(length, length, dtype=torch.bool, device=device).tril() & "
             "~torch.ones(length, length, dtype=torch.bool, device=device).tril(-3))[None, None]",
             "each decoder position attends to the last three positions only"),
    Mutation("heads-merged", "repro/model/attention.py",
             "        return x.view(batch, length, self.n_heads, d).transpose(1, 2)",
             "        return x.view(batch, length, max(self.n_heads // 2, 1), -1).transpose(1, 2)",
             "attention runs half the heads at twice d_k, while the weights keep the preset's shapes"),
    Mutation("adam-amsgrad", "repro/train/optimizer.py",
             '    return torch.optim.Adam(params, lr=0.0, betas=betas, eps=eps, **({"fused": True} if fused else {}))',
             '    return torch.optim.Adam(params, lr=0.0, betas=betas, eps=eps, amsgrad=True, '
             '**({"fused": True} if fused else {}))',
             "Adam with AMSGrad: the betas and epsilon read off param_groups are right, the update is not"),
    Mutation("pruning-keeps-10", "repro/train/checkpoint.py",
             "    doomed = paths[:-keep] if keep > 0 else []", "    doomed = paths[:-min(keep, 10)] if keep > 0 else []",
             "the loop keeps at most 10 checkpoints: the big model's evaluation cannot average 20"),
    Mutation("table3-ls-row-dropped", "repro/model/table3.py",
             '    Row("D-ls0.2", "D", "eps_ls=0.2 (the base architecture; the row changes training)", {"eps_ls": 0.2}),',
             '    Row("D-ls0.2", "D", "eps_ls=0.2 (the base architecture; the row changes training)", {}),',
             "Table 3's eps_ls = 0.2 row trains with the base's 0.1"),
    Mutation("table3-big-from-base", "repro/model/table3.py",
             '    Row("big", "big", "big model", {"d_model": 1024, "d_ff": 4096, "h": 16, "P_drop": 0.3, "train_steps": 300_000}),',
             '    Row("big", "big", "big model", {"d_model": 1024, "d_ff": 4096, "h": 16, "P_drop": 0.3, "train_steps": 100_000}),',
             "Table 3's big row trains the base's 100K steps (the row's steps now live in Table 3's row table)"),
    Mutation("table3-row-e-sinusoids", "repro/model/table3.py",
             '    Row("E-learned", "E", "learned positional embedding instead of sinusoids", {"PE": "learned"}),',
             '    Row("E-learned", "E", "learned positional embedding instead of sinusoids", {}),',
             "Table 3's row (E) keeps the sinusoids"),
    Mutation("table3-row-d-dropout", "repro/model/table3.py",
             '    Row("D-drop0.2", "D", "P_drop=0.2", {"P_drop": 0.2}),',
             '    Row("D-drop0.2", "D", "P_drop=0.2", {"P_drop": 0.1}),',
             "Table 3's P_drop = 0.2 row trains at 0.1"),
    Mutation("bleu-no-brevity-penalty", "repro/eval/bleu.py",
             "    bp = math.exp(1 - s.ref_len / s.hyp_len) if s.hyp_len < s.ref_len else 1.0", "    bp = 1.0",
             "multi-bleu's brevity penalty left out"),
    Mutation("bleu-no-escaping", "repro/eval/bleu.py",
             "    return _moses(lang).tokenize(line, return_str=True, escape=True, aggressive_dash_splits=False)",
             "    return _moses(lang).tokenize(line, return_str=True, escape=False, aggressive_dash_splits=False)",
             "tokenizer.perl's XML escaping off"),
    Mutation("bleu-compound-split-overlapping", "repro/eval/bleu.py",
             '    return _COMPOUND.sub(r"\\1 ##AT##-##AT## \\2", line)',
             '    return re.sub(r"(?<=\\S)-(?=\\S)", " ##AT##-##AT## ", line)',
             "every hyphen split (Perl's substitution does not overlap: 3-4-5 splits once)"),
    Mutation("layernorm-without-gain-and-bias", "repro/model/layers.py",
             "        self.norm = nn.LayerNorm(d_model)", "        self.norm = nn.LayerNorm(d_model, elementwise_affine=False)",
             "layer normalisation without its learned gain and bias"),
    Mutation("length-penalty-half-alpha", "repro/decode/beam.py",
             "    return ((5.0 + length) / 6.0) ** alpha", "    return ((5.0 + length) / 6.0) ** (alpha / 2)",
             "the search ranks with half the alpha it is given"),
    Mutation("loss-scaled-per-pass", "repro/train/update_step.py",
             "    scale = (world_size / tokens[1].clamp(min=1.0)).float()   # a device tensor: no sync, no recompile",
             "    scale = (world_size * len(micro) / tokens[1].clamp(min=1.0)).float()   # a device tensor: no sync, no recompile",
             "an update's loss scaled by its number of passes (the mean of the passes' means)"),
    Mutation("batcher-over-cap", "repro/data/batching.py",
             "            if n > 1 and (n * s > cap or n * t > cap or n > limit or rs + rt > budget):",
             "            if n > 1 and ((n - 1) * s > cap or (n - 1) * t > cap or n > limit or rs + rt > budget):",
             "the batcher lets a pass hold one sentence more than the device's token cap"),
    # -- fresh mistakes (the lead's probe after issue 28: none of them was written down before) ----
    Mutation("fused-ignores-causal-flag", "repro/model/attention.py",
     "        mask = triangle if mask is None else mask & triangle",
     "        mask = mask",
             "the fused kernel drops the decoder's causal flag in training"),
    Mutation("reference-causal-off-by-one", "repro/model/attention.py",
     "                tril = torch.ones(n, m, dtype=torch.bool, device=q.device).tril(m - n)",
     "                tril = torch.ones(n, m, dtype=torch.bool, device=q.device).tril(m - n + 1)",
             "the attention maps' path lets position i see i + 1"),
    Mutation("softmax-over-queries", "repro/model/attention.py",
     "    weights = scores.softmax(dim=-1)", "    weights = scores.softmax(dim=-2)",
             'the softmax normalises over the queries, not the keys'),
    Mutation("attention-dropout-always-on", "repro/model/attention.py",
     "    weights = scores.softmax(dim=-1)", "    weights = F.dropout(scores.softmax(dim=-1), 0.1)",
             'dropout on the attention weights, also at evaluation (not in the paper)'),
    Mutation("kv-cache-value-not-reordered", "repro/model/attention.py",
     "            self.value[:, :, :self.length] = self.values().index_select(0, index)",
     "            self.value[:, :, :self.length] = self.values()",
             'the beam reorders the cached keys but not the values'),
    Mutation("positional-base-1000", "repro/model/positional.py",
     "    inv_freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model))",
     "    inv_freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(1000.0) / d_model))",
             'sinusoid wavelengths up to 1000 * 2 pi instead of 10000 * 2 pi'),
    Mutation("warmup-exponent", "repro/train/schedule.py",
     "    return scale * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)",
     "    return scale * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.0)",
             "Eq. 3's warm-up branch step * warmup^-1 instead of ^-1.5"),
    Mutation("adam-eps-1e-8", "repro/train/config.py",
     "    adam_eps: float = 1e-9", "    adam_eps: float = 1e-8",
             "Adam's epsilon 1e-8 (PyTorch's default) instead of 1e-9"),
    Mutation("average-divides-by-k-minus-1", "repro/train/average.py",
     "    return {k: (v / len(states)).to(first[k].dtype) if first[k].is_floating_point() else v for k, v in total.items()}",
     "    return {k: (v / max(len(states) - 1, 1)).to(first[k].dtype) if first[k].is_floating_point() else v for k, v in total.items()}",
             'the average divides the sum of k checkpoints by k - 1'),
    Mutation("beam-penalty-one-short", "repro/decode/beam.py",
     "        lp = length_penalty(step + 1, alpha)", "        lp = length_penalty(step, alpha)",
             'the length penalty counts |Y| without the end token'),
    Mutation("beam-candidates-k", "repro/decode/beam.py",
     "        top_s, top_i = cand.topk(2 * k, dim=1)", "        top_s, top_i = cand.topk(k, dim=1)",
             'the beam expands only k candidates (finished ones crowd out live ones)'),
    Mutation("dense-loss-counts-padding", "repro/train/loss.py",
     "    return loss.masked_fill(pad, 0.0).sum() * scale, nll.masked_fill(pad, 0.0).sum(), (~pad).sum()",
     "    return loss.sum() * scale, nll.masked_fill(pad, 0.0).sum(), (~pad).sum()",
             'the dense loss (GPU, compiled) counts padding positions'),
    Mutation("padding-mask-on-queries", "repro/model/masks.py",
     "    return (tokens != pad_id)[:, None, None, :]", "    return (tokens != pad_id)[:, None, :, None]",
             'the padding mask hides padded queries instead of padded keys'),
    Mutation("decoder-positions-from-1", "repro/model/transformer.py",
     "        return self.embed_dropout(embed(tokens) + pos(tokens.size(1), offset))",
     "        return self.embed_dropout(embed(tokens) + pos(tokens.size(1), offset + 1))",
             'positions counted from 1 instead of 0'),
    Mutation("dropout-before-sublayer", "repro/model/layers.py",
     "        return self.norm(x + self.dropout(y := sublayer(x))).to(y.dtype)", "        return self.norm(x + (y := sublayer(self.dropout(x)))).to(y.dtype)",
             "dropout applied to the sub-layer's input, not its output"),
    Mutation("lr-dmodel-exponent", "repro/train/schedule.py",
     "    return scale * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)",
     "    return scale * d_model**-1.0 * min(step**-0.5, step * warmup_steps**-1.5)",
             'Eq. 3 scaled by d_model^-1 instead of d_model^-0.5'),
    Mutation("ffn-relu-after-w2", "repro/model/feedforward.py",
     "        return self.w_2(self.w_1(x).relu())", "        return self.w_2(self.w_1(x)).relu()",
             'the ReLU applied after W_2 instead of between the two transforms'),
    Mutation("encoder-self-attention-unmasked", "repro/model/layers.py",
     "        x = self.sublayers[0](x, lambda y: self.self_attn(y, y, y, mask))",
     "        x = self.sublayers[0](x, lambda y: self.self_attn(y, y, y, None))",
             "the encoder's self-attention ignores padding"),
    Mutation("perplexity-base-2", "repro/eval/perplexity.py",
     "    result = Perplexity(math.exp(total / max(tokens, 1)), total, tokens)",
     "    result = Perplexity(2 ** (total / max(tokens, 1)), total, tokens)",
             'perplexity as 2^(nats per token)'),
    Mutation("bleu-no-clipping", "repro/eval/bleu.py",
     "            stats.correct[n - 1] += sum(min(c, max_ref[g]) for g, c in hyp_ngrams.items())",
     "            stats.correct[n - 1] += sum(c for g, c in hyp_ngrams.items() if max_ref[g])",
             "BLEU's n-gram matches not clipped by the reference counts"),
    Mutation("bleu-bp-inverted", "repro/eval/bleu.py",
     "    bp = math.exp(1 - s.ref_len / s.hyp_len) if s.hyp_len < s.ref_len else 1.0",
     "    bp = math.exp(1 - s.hyp_len / s.ref_len) if s.hyp_len < s.ref_len else 1.0",
             "BLEU's brevity penalty with the lengths swapped"),
    # -- issue 38: fresh mistakes against the run (training arithmetic, model, checkpoints, runtime, records) --
    Mutation("loss-over-source-tokens", "repro/train/update_step.py",
     "    scale = (world_size / tokens[1].clamp(min=1.0)).float()   # a device tensor: no sync, no recompile",
     "    scale = (world_size / tokens[0].clamp(min=1.0)).float()   # a device tensor: no sync, no recompile",
             "the update's loss divided by its source tokens, not its target tokens"),
    Mutation("loss-scale-forgets-world-size", "repro/train/update_step.py",
     "    scale = (world_size / tokens[1].clamp(min=1.0)).float()   # a device tensor: no sync, no recompile",
     "    scale = (1.0 / tokens[1].clamp(min=1.0)).float()   # a device tensor: no sync, no recompile",
             "each rank's loss divided by the update's tokens without undoing DDP's average over ranks"),
    Mutation("ddp-syncs-every-pass", "repro/train/update_step.py",
     "        sync = objective.no_sync() if world_size > 1 and not last else nullcontext()  # type: ignore[operator]",
     "        sync = nullcontext()  # type: ignore[operator]",
             "every pass of an accumulated update all-reduces gradients (same sum, eight times the traffic)"),
    Mutation("ddp-syncs-first-pass", "repro/train/update_step.py",
     "        sync = objective.no_sync() if world_size > 1 and not last else nullcontext()  # type: ignore[operator]",
     "        sync = objective.no_sync() if world_size > 1 and i > 0 else nullcontext()  # type: ignore[operator]",
             "the first pass of an accumulated update synchronises, the last does not"),
    Mutation("target-tokens-without-eos", "repro/data/batching.py",
     "                 src_tokens=int(src_lens.sum()), tgt_tokens=int(tgt_lens.sum()) + n, indices=list(indices))",
     "                 src_tokens=int(src_lens.sum()), tgt_tokens=int(tgt_lens.sum()), indices=list(indices))",
             "a batch's target tokens counted without the EOS each target is trained to predict"),
    Mutation("encoded-target-cost-without-eos", "repro/data/batching.py",
     "            self._tgt_cost = np.asarray(tgt_len, dtype=np.int64) + 1",
     "            self._tgt_cost = np.asarray(tgt_len, dtype=np.int64)",
             "the batcher packs the encoded corpus without the targets' EOS (passes over the cap)"),
    Mutation("encoded-lengths-swapped", "repro/data/encoded.py",
     "        return np.diff(self.src_offsets), np.diff(self.tgt_offsets)",
     "        return np.diff(self.tgt_offsets), np.diff(self.src_offsets)",
             "the encoded corpus reports its target lengths as the source's and vice versa"),
    Mutation("fused-spread-over-v-minus-1", "repro/train/loss.py",
     "        off = epsilon / (vocab - 2)", "        off = epsilon / (vocab - 1)",
             "the fused loss spreads the smoothing over V - 1 tokens while giving PAD none"),
    Mutation("dense-smoothing-includes-pad", "repro/train/loss.py",
     "        others = (vocab - 1) * lse - (z.sum(-1) - z[:, pad_id]) - nll   # sum over k not in {y, PAD}",
     "        others = vocab * lse - z.sum(-1) - nll   # sum over k not in {y, PAD}",
             "the dense (GPU) loss gives PAD its share of the smoothing"),
    Mutation("dense-loss-unscaled", "repro/train/loss.py",
     "    return loss.masked_fill(pad, 0.0).sum() * scale, nll.masked_fill(pad, 0.0).sum(), (~pad).sum()",
     "    return loss.masked_fill(pad, 0.0).sum(), nll.masked_fill(pad, 0.0).sum(), (~pad).sum()",
             "the dense (GPU) loss ignores the update's scale: its gradient is the sum, not the mean, over tokens"),
    Mutation("bf16-master-weights", "repro/train/loop.py",
     "    model = Transformer(model_cfg).to(runtime.device)",
     "    model = Transformer(model_cfg).to(runtime.device, dtype=runtime.precision.dtype)",
             "mixed precision casts the model itself to bf16 (no fp32 master weights)"),
    Mutation("final-encoder-norm", "repro/model/transformer.py",
     "        self.encoder_norm = nn.LayerNorm(cfg.d_model) if cfg.norm_first else nn.Identity()",
     "        self.encoder_norm = nn.LayerNorm(cfg.d_model)",
             "a LayerNorm at the top of the post-norm encoder (not in the paper)"),
    Mutation("dropout-inside-ffn", "repro/model/feedforward.py",
     "        return self.w_2(self.w_1(x).relu())",
     "        return self.w_2(nn.functional.dropout(self.w_1(x).relu(), 0.1, self.training))",
             "dropout on the feed-forward network's hidden activations (Section 5.4 puts none there)"),
    Mutation("prune-keeps-oldest", "repro/train/checkpoint.py",
     "    doomed = paths[:-keep] if keep > 0 else []", "    doomed = paths[keep:] if keep > 0 else []",
             "pruning keeps the oldest checkpoints and deletes the newest"),
    Mutation("prune-keeps-one-fewer", "repro/train/checkpoint.py",
     "    doomed = paths[:-keep] if keep > 0 else []", "    doomed = paths[:1 - keep] if keep > 1 else []",
             "pruning keeps one checkpoint fewer than asked"),
    Mutation("checkpoints-ordered-by-file-time", "repro/train/checkpoint.py",
     "    return [p for _, p in sorted(found)]",
     "    return [p for _, p in sorted(found, key=lambda sp: sp[1].stat().st_mtime_ns)]",
             "checkpoints ordered by their files' times, not their steps (pruning and resume follow it)"),
    Mutation("resume-from-oldest", "repro/train/loop.py",
     "        step, unchecked = restore(existing[-1], trainer, allow_no_lineage)",
     "        step, unchecked = restore(existing[0], trainer, allow_no_lineage)",
             "a resumed run restores the oldest checkpoint"),
    Mutation("device-from-global-rank", "repro/train/loop.py",
     '    local_rank = env_int("LOCAL_RANK", env_int("SLURM_LOCALID", rank))',
     "    local_rank = rank",
             "each task takes the GPU of its global rank (cuda:5 on a 4-GPU node)"),
    Mutation("slurm-localid-ignored", "repro/train/loop.py",
     '    local_rank = env_int("LOCAL_RANK", env_int("SLURM_LOCALID", rank))',
     '    local_rank = env_int("LOCAL_RANK", rank)',
             "SLURM's local rank ignored: tasks launched by srun take the GPU of their global rank"),
    Mutation("bound-gpu-by-local-rank", "repro/runtime.py",
     '        return torch.device("cuda", 0)', '        return torch.device("cuda", local_rank)',
             "a task SLURM bound one GPU to asks for cuda:<local rank>, which it cannot see"),
    Mutation("main-rank-is-last", "repro/train/loop.py",
     "            due = cadence.due(step) and trainer.rank == 0",
     "            due = cadence.due(step) and trainer.rank == trainer.world_size - 1",
             "the last rank, not rank 0, writes the checkpoints"),
    Mutation("is-main-any-rank", "repro/runtime.py",
     "        return self.rank == 0", "        return self.local_rank == 0",
             "every node's first task calls itself the main one"),
    Mutation("auto-bf16-without-margin", "repro/model/precision.py",
     "    if bf16 >= MARGIN * fp32:", "    if bf16 >= fp32:",
             "auto picks bf16 on a CPU where it is barely faster than fp32"),
    Mutation("auto-bf16-on-any-gpu", "repro/model/precision.py",
     '    if name == "bf16" or (name == "auto" and supported):', '    if name in ("bf16", "auto"):',
             "auto picks bf16 on a GPU without native bf16"),
    Mutation("gpu-adam-not-fused", "repro/train/optimizer.py",
     '    fused = bool(params) and all(p.device.type == "cuda" for p in params)',
     '    fused = bool(params) and all(p.device.type == "cuda:0" for p in params)',
             "the GPU path never builds the fused Adam"),
    Mutation("gpu-adam-default-betas", "repro/train/optimizer.py",
     '    return torch.optim.Adam(params, lr=0.0, betas=betas, eps=eps, **({"fused": True} if fused else {}))',
     '    return torch.optim.Adam(params, lr=0.0, **({"fused": True} if fused else {"betas": betas, "eps": eps}))',
             "the fused (GPU) Adam built with torch's default betas and epsilon"),
    Mutation("divergence-on-nan-only", "repro/train/update_step.py",
     "                               (~torch.isfinite(loss.detach())).double()])",
     "                               torch.isnan(loss.detach()).double()])",
             "the divergence stop sees NaN but not an infinite loss"),
    Mutation("divergence-not-reduced", "repro/train/update_step.py",
     "    return torch.cat([_all_reduce(totals), tokens])",
     "    return torch.cat([totals, tokens])",
             "the loss sums and the count of non-finite passes are not reduced over the ranks"),
    Mutation("paper-bleu-stores-sacrebleu", "repro/measures/translation_quality.py",
     '        round(bleu.paper.score, 2), "BLEU (tokenized, compound splitting)",',
     '        round(bleu.sacrebleu.score, 2), "BLEU (tokenized, compound splitting)",',
             "the paper-protocol BLEU measurement stores sacreBLEU's score"),
    Mutation("infinity-counts-as-measured", "repro/measures/measure_registry.py",
     "        return isinstance(self.value, (int, float)) and not isinstance(self.value, bool) and math.isfinite(self.value)",
     "        return isinstance(self.value, (int, float)) and not isinstance(self.value, bool) and not math.isnan(self.value)",
             "an infinite measurement is stored as a measured value"),
    Mutation("shards-merged-in-blocks", "repro/eval/sharding.py",
     "        out[r::world] = part", "        out[r * len(gathered[0]):r * len(gathered[0]) + len(part)] = part",
             "a sharded evaluation puts each rank's outputs back as one block, not interleaved"),
    Mutation("encoded-cache-on-size-and-mtime", "repro/train/data.py",
     '    files = {str(p.resolve()): {"size": p.stat().st_size, "sha256": file_sha256(p)} for p in (src_path, tgt_path)}',
     '    files = {str(p.resolve()): {"size": p.stat().st_size, "mtime": p.stat().st_mtime_ns} for p in (src_path, tgt_path)}',
             "the encoded corpus keyed on its sources' size and mtime: one edited in place is reused"),
    Mutation("step-time-since-the-first-update", "repro/train/step_clock.py",
     "        self.updates.append(self.clock() - self._top)",
     "        self.updates.append(self.clock() - (self.first_update_at or self._top))",
             "each update timed from the run's first update: a resumed run's step time grows with the run"),
    # -- issue 38 (parsing, EVALB, BLEU's case rule, Table 3 at a scale): written to break the checks --
    Mutation("evalb-test-bracket-matched-twice", "repro/eval/evalb.py",
     "            if g.result != 5 and t.result == 0 and (g.start, g.end) == (t.start, t.end):",
     "            if g.result != 5 and t.result != 5 and (g.start, g.end) == (t.start, t.end):",
             "EVALB lets a test bracket already matched match another gold bracket"),
    Mutation("evalb-gold-bracket-matched-twice", "repro/eval/evalb.py",
     "                    break", "                    pass",
             "EVALB lets a gold bracket match every test bracket of its span and label"),
    Mutation("evalb-eq-label-one-way", "repro/eval/evalb_params.py",
     "        return a == b or any((a, b) in ((x, y), (y, x)) for x, y in self.eq_labels)",
     "        return a == b or any((a, b) == (x, y) for x, y in self.eq_labels)",
             "EQ_LABEL ADVP PRT read in one direction only (gold PRT against test ADVP unmatched)"),
    Mutation("evalb-cutoff-strict", "repro/eval/evalb.py",
     "        return Summary.of([r for r in self.rows if r.length <= self.params.cutoff_len])",
     "        return Summary.of([r for r in self.rows if r.length < self.params.cutoff_len])",
             "the length cut-off leaves out sentences of exactly 40 words"),
    Mutation("evalb-length-without-punctuation", "repro/eval/evalb.py",
     "                if closes and label not in params.delete_labels_for_length:",
     "                if closes and label not in params.delete_labels:",
             "the sentence length for the cut-off skips punctuation (COLLINS.prm skips only -NONE-)"),
    Mutation("evalb-empty-constituent-scored", "repro/eval/evalb.py",
     "        if b.start == b.end:", "        if b.start > b.end:",
             "a constituent left empty by -NONE- deletion is scored"),
    Mutation("collins-prm-scores-colons", "repro/eval/evalb_params.py",
     "    delete_labels=(\"TOP\", \"-NONE-\", \",\", \":\", \"``\", \"''\", \".\"),",
     "    delete_labels=(\"TOP\", \"-NONE-\", \",\", \"``\", \"''\", \".\"),",
             "COLLINS.prm without DELETE_LABEL : (colons and semicolons scored)"),
    Mutation("evalb-label-cut-at-dash-only", "repro/eval/evalb.py",
     "        if ch in \"-=\":", "        if ch == \"-\":",
             "labels cut at '-' but not at '=' (VP=2 stays VP=2)"),
    Mutation("delinearize-accepts-empty-constituent", "repro/parsing/linearize.py",
     "            if len(node) == 0:", "            if len(node) < 0:",
             "the strict inverse accepts an empty constituent"),
    Mutation("delinearize-accepts-missing-words", "repro/parsing/linearize.py",
     "    if n_leaves != len(words):", "    if n_leaves > len(words):",
             "the strict inverse accepts a sequence with fewer XX than words"),
    Mutation("repair-appends-missing-words-at-top", "repro/parsing/repair.py",
     "        home = last if isinstance(last, _Node) else top", "        home = top",
             "the repair hangs missing words off the wrapper instead of the last constituent"),
    Mutation("linearize-collapses-unary", "repro/parsing/linearize.py",
     "        if len(node) == 1 and isinstance(node[0], str):", "        if len(node) == 1:",
             "linearisation writes a unary chain's child as XX (round trip loses constituents)"),
    Mutation("sacrebleu-lowercased", "repro/eval/bleu.py",
     "    metric = BLEU(tokenize=tokenize) if tokenize else BLEU()",
     "    metric = BLEU(tokenize=tokenize, lowercase=True) if tokenize else BLEU(lowercase=True)",
             "the sacreBLEU protocol scores lowercased text (sacreBLEU's default is case-sensitive)"),
    Mutation("multi-bleu-lowercases-hypotheses", "repro/eval/bleu.py",
     "        words = hyp.split()", "        words = hyp.lower().split()",
             "the paper protocol lowercases the hypotheses (multi-bleu.perl without -lc is case-sensitive)"),
    Mutation("scaled-train-steps-not-multiplied", "repro/model/table3.py",
     "    Cell(\"train_steps\", \"max_steps\", \"train\", True),",
     "    Cell(\"train_steps\", \"max_steps\", \"train\", False),",
             "at a scale, big trains the paper's 300K steps instead of three times the scale's base"),
    Mutation("scaled-seeds-from-zero", "repro/cluster/experiments.py",
     "        for seed in range(1, plan.seeds + 1):", "        for seed in range(plan.seeds):",
             "Table 3 at a scale runs seeds 0..n-1 (seed 0 is the recipes' default)"),
    Mutation("scaled-seed-not-trained", "repro/cluster/experiments.py",
     "            job = plan.job(\"table3\", name, recipe.replace(seed=seed), scaled_claims(scale.name, row),",
     "            job = plan.job(\"table3\", name, recipe, scaled_claims(scale.name, row),",
             "every seed of a row trains the recipe's own seed (the seeds are copies)"),
    Mutation("welch-df-rounded-up", "repro/eval/seeds.py",
     "        training = t975(max(1, math.floor(df + 1e-9))) * math.sqrt(total)",
     "        training = t975(max(1, math.ceil(df))) * math.sqrt(total)",
             "Welch's degrees of freedom rounded up (a narrower interval)"),
    Mutation("seeds-t-with-n-degrees", "repro/eval/seeds.py",
     "    training = t975(n - 1) * stdev / math.sqrt(n) if n > 1 else 0.0",
     "    training = t975(n) * stdev / math.sqrt(n) if n > 1 else 0.0",
             "a row's interval uses t with n degrees of freedom instead of n - 1"),
    Mutation("seeds-bootstrap-not-averaged-down", "repro/eval/seeds.py",
     "    return SeedSummary(dict(values), mean, stdev, math.hypot(training, bootstrap / math.sqrt(n)), bootstrap)",
     "    return SeedSummary(dict(values), mean, stdev, math.hypot(training, bootstrap), bootstrap)",
             "the seeds' bootstrap half width not divided by sqrt(n) for their mean"),
    Mutation("equivalence-on-the-estimate", "repro/scaled/verdicts.py",
     "        if -within <= low and high <= within:", "        if -within <= (low + high) / 2 <= within:",
             "'nearly identical' holds when the estimate is within ±k, whatever its interval"),
    # -- issue 45, fresh mistakes (helper "mistakes"): the update read late, the loss's one-pass backward,
    # -- the length buckets, the recipes, the search, the BLEU script and the averaging, none tried before --
    Mutation("read-late-skips-finite-updates", "repro/train/update_step.py",
     "        optimizer.found_inf = (figures[2] > 0).float()   # type: ignore[attr-defined]",
     "        optimizer.found_inf = (figures[2] == 0).float()   # type: ignore[attr-defined]",
             "read late (one GPU, fused Adam), the device skips every finite update and takes the non-finite ones"),
    Mutation("read-late-never-skips", "repro/train/update_step.py",
     "        optimizer.found_inf = (figures[2] > 0).float()   # type: ignore[attr-defined]",
     "        optimizer.found_inf = (figures[2] < 0).float()   # type: ignore[attr-defined]",
             "read late, a non-finite update's step is taken on the device (the weights turn NaN before the stop)"),
    Mutation("loop-checkpoints-unread-update", "repro/train/loop.py",
     "            if launched.deferred and not due and step < cfg.max_steps:",
     "            if launched.deferred and step < cfg.max_steps:",
             "read late, a due update is left waiting too: no checkpoint is ever written for it"),
    Mutation("loop-earlier-update-checkpointed", "repro/train/loop.py",
     "                settle(*earlier, due=False)", "                settle(*earlier, due=due)",
             "read late, a checkpoint due now is also written under the previous update's step (holding this one's weights)"),
    Mutation("logged-nll-is-smoothed-loss", "repro/train/update_step.py",
     "            self._stats = UpdateStats(self.step, self.lr, src, tgt, loss_sum / tokens, nll_sum / tokens, self.padding)",
     "            self._stats = UpdateStats(self.step, self.lr, src, tgt, loss_sum / tokens, loss_sum / tokens, self.padding)",
             "the update's NLL per token reported as its label-smoothed loss (training perplexity too high)"),
    Mutation("logged-loss-is-scaled", "repro/train/update_step.py",
     "        totals += torch.stack([loss.detach().double() / scale, nll.detach().to(device).double(),",
     "        totals += torch.stack([loss.detach().double(), nll.detach().to(device).double(),",
             "the update's loss sum kept as the back-propagated (scaled) loss: the logged loss per token is tiny"),
    Mutation("padding-share-inverted", "repro/train/update_step.py",
     "    return 1.0 - sum(b.src_tokens + b.tgt_tokens for b in micro) / positions if positions else 0.0",
     "    return sum(b.src_tokens + b.tgt_tokens for b in micro) / positions if positions else 0.0",
             "the padding share reported as the real tokens' share"),
    Mutation("eager-backward-no-spread", "repro/train/loss.py",
     "        grad = _widened(logits).sub(lse[:, None]).exp_().sub_(off)",
     "        grad = _widened(logits).sub(lse[:, None]).exp_()",
             "the dense loss's eager backward forgets eps / (V - 2) on the other tokens"),
    Mutation("eager-backward-pad-gets-mass", "repro/train/loss.py",
     "        grad[:, ctx.pad_id] += off", "        pass",
             "the dense loss's eager backward gives PAD a share of the smoothing"),
    Mutation("compiled-backward-no-smoothing", "repro/train/loss.py",
     "            grad = torch.where(classes == target[:, None], p - (1.0 - eps),",
     "            grad = torch.where(classes == target[:, None], p - 1.0,",
             "the dense loss's compiled backward puts 1 on the reference token, not 1 - eps"),
    Mutation("compiled-backward-pad-gets-mass", "repro/train/loss.py",
     "                               torch.where(classes == ctx.pad_id, p, p - off))",
     "                               p - off)",
             "the dense loss's compiled backward gives PAD a share of the smoothing"),
    Mutation("dense-forward-spread-over-v", "repro/train/loss.py",
     "        loss = (1.0 - epsilon) * nll + epsilon / (vocab - 2) * others",
     "        loss = (1.0 - epsilon) * nll + epsilon / vocab * others",
             "the dense loss's forward spreads eps over V (its backward over V - 2)"),
    Mutation("dense-nll-counts-padding", "repro/train/loss.py",
     "    return loss.masked_fill(pad, 0.0).sum() * scale, nll.masked_fill(pad, 0.0).sum(), (~pad).sum()",
     "    return loss.masked_fill(pad, 0.0).sum() * scale, nll.sum(), (~pad).sum()",
             "the dense loss's NLL sum (perplexity) counts the PAD positions"),
    Mutation("warmup-max-not-min", "repro/train/schedule.py",
     "    return scale * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)",
     "    return scale * d_model**-0.5 * max(step**-0.5, step * warmup_steps**-1.5)",
             "Eq. 3 takes the larger branch: the rate decays first and grows without bound"),
    Mutation("buckets-by-source-only", "repro/data/buckets.py",
     "        self._cell = np.searchsorted(bounds, self._src_cost) * width + np.searchsorted(bounds, self._tgt_cost)",
     "        self._cell = np.searchsorted(bounds, self._src_cost) * width + np.searchsorted(bounds, self._src_cost)",
             "the length buckets read the source length only (the targets' padding is left as it falls)"),
    Mutation("buckets-same-stream-every-epoch", "repro/data/buckets.py",
     "        rng = np.random.default_rng([self.seed, epoch])", "        rng = np.random.default_rng(self.seed)",
             "every epoch streams the pairs in the same order"),
    Mutation("buckets-drop-what-waits", "repro/data/buckets.py",
     "            waiting[cell] = (members[start:], epochs[start:])", "            waiting[cell] = (_NONE, _NONE)",
             "the pairs a bucket holds at the end of an epoch are dropped, never trained on"),
    Mutation("buckets-budget-both-sides-once", "repro/data/buckets.py",
     "              & (np.cumsum(src + tgt) <= 2 * (self.budget or self.max_tokens)))",
     "              & (np.cumsum(src + tgt) <= (self.budget or self.max_tokens)))",
             "a bucket's batch holds ~25000 tokens of both sides together, not 25000 + 25000"),
    Mutation("buckets-one-pair-over", "repro/data/buckets.py",
     "        return max(1, int(np.argmin(ok)) if not ok.all() else len(members))",
     "        return max(1, int(np.argmin(ok)) + 1 if not ok.all() else len(members))",
             "a bucket's batch takes the pair that breaks its bound"),
    Mutation("batches-not-shuffled", "repro/data/batching.py",
     "            batches = [batches[j] for j in rng.permutation(len(batches))]", "            batches = batches",
             "the sorted batcher yields each epoch's batches from the shortest to the longest"),
    Mutation("batcher-budget-both-sides-once", "repro/data/batching.py",
     "        budget = 2 * (self.budget or cap)   # real tokens never exceed the padded size: no budget binds at cap",
     "        budget = self.budget or cap   # real tokens never exceed the padded size: no budget binds at cap",
             "a sorted batch holds ~25000 tokens of both sides together, not 25000 + 25000"),
    Mutation("beam-stops-at-first-finished", "repro/decode/beam.py",
     "        enough = count[active] >= k", "        enough = count[active] >= 1",
             "the search stops at the first finished hypothesis, not at k"),
    Mutation("beam-finished-stay-live", "repro/decode/beam.py",
     "        live_s, live_pos = top_s.masked_fill(is_eos, float(\"-inf\")).topk(k, dim=1)",
     "        live_s, live_pos = top_s.topk(k, dim=1)",
             "a hypothesis that ended with EOS stays in the beam and is extended"),
    Mutation("beam-limit-counts-padding", "repro/decode/beam.py",
     "    limit = source_lengths(src, model.cfg.pad_id) + offset        # (B,) output tokens allowed, EOS excluded",
     "    limit = torch.full((src.size(0),), src.size(1), device=src.device) + offset        # (B,) output tokens allowed, EOS excluded",
             "the output limit counts the padded source length, not each sentence's"),
    Mutation("beam-eos-outside-top-k-counts", "repro/decode/beam.py",
     "        counted = is_eos & (order < k) if stop == \"early\" else is_eos  # an EOS must rank among the best k",
     "        counted = is_eos  # an EOS must rank among the best k",
             "an EOS ranked below the best k candidates still finishes a hypothesis"),
    Mutation("bleu-hypotheses-not-split", "repro/eval/bleu.py",
     "    hyp_at = [compound_split(h) for h in hyp_tok]", "    hyp_at = hyp_tok",
             "the compound split applied to the references only"),
    Mutation("bleu-add-one-smoothing", "repro/eval/bleu.py",
     "    precisions = [c / t if t else 0.0 for c, t in zip(s.correct, s.total)]",
     "    precisions = [(c + 1) / (t + 1) for c, t in zip(s.correct, s.total)]",
             "multi-bleu's precisions smoothed by add-one (the script does not smooth)"),
    Mutation("bleu-mean-over-three", "repro/eval/bleu.py",
     "    log_mean = sum(math.log(p) if p > 0 else -9999999999 for p in precisions) / len(precisions)",
     "    log_mean = sum(math.log(p) if p > 0 else -9999999999 for p in precisions) / (len(precisions) - 1)",
             "BLEU's geometric mean divides the log sum by 3, not 4"),
    Mutation("average-drops-first", "repro/train/average.py",
     "    total = {k: v.double() if v.is_floating_point() else v for k, v in first.items()}",
     "    total = {k: torch.zeros_like(v, dtype=torch.float64) if v.is_floating_point() else v for k, v in first.items()}",
             "the average's sum leaves out the first checkpoint (k - 1 summed, divided by k)"),
    Mutation("big-averages-last-5", "repro/recipes.py",
     "             \"big\", \"big\", max_steps=300_000, average_last=20)",
     "             \"big\", \"big\", max_steps=300_000, average_last=5)",
             "the big EN-DE recipe averages the last 5 checkpoints, not 20"),
    Mutation("big-enfr-base-steps", "repro/recipes.py",
     "                  \"big\", dataset=\"wmt14-en-fr\", max_steps=300_000, average_last=20)",
     "                  \"big\", dataset=\"wmt14-en-fr\", max_steps=100_000, average_last=20)",
             "the big EN-FR recipe trains the base's 100K steps"),
    Mutation("checkpoint-spacing-minutes-as-seconds", "repro/recipes.py",
     "    return round(CHECKPOINT_MINUTES * 60 / PAPER_STEP_SECONDS[size])",
     "    return round(CHECKPOINT_MINUTES / PAPER_STEP_SECONDS[size])",
             "the paper recipes' checkpoint spacing reads 10 minutes as 10 seconds (25 updates, not 1500)"),
    Mutation("table3-rows-averaged", "repro/recipes.py",
     "                         preset=row, average_last=1, **table3_changes(row).train)",
     "                         preset=row, **table3_changes(row).train)",
             "Table 3's rows average the base's last 5 checkpoints (the paper: no checkpoint averaging)"),
    # A fifth hand round (branch mut4): mistakes nobody had listed, written down before any was run.
    Mutation("attention-scaled-by-sqrt-d-model", "repro/model/attention.py",
     "    d_k = query.size(-1)", "    d_k = query.size(-1) * (query.size(1) if query.dim() == 4 else 1)",
             "multi-head attention scales its dot products by 1/sqrt(d_model) (= h d_k), not 1/sqrt(d_k)"),
    Mutation("masked-scores-zeroed", "repro/model/attention.py",
     "        scores = scores.masked_fill(~mask, float(\"-inf\"))", "        scores = scores.masked_fill(~mask, 0.0)",
             "masked scores set to 0 before the softmax (they keep weight), not to -inf"),
    Mutation("heads-split-without-transpose", "repro/model/attention.py",
     "        return x.view(batch, length, self.n_heads, d).transpose(1, 2)",
     "        return x.view(batch, self.n_heads, length, d)",
             "the heads split by a view to (batch, h, n, d) without the transpose (positions and heads mixed)"),
    Mutation("heads-merged-without-transpose", "repro/model/attention.py",
     "        return self.w_o(out.transpose(1, 2).reshape(batch, length, self.n_heads * self.d_v))",
     "        return self.w_o(out.reshape(batch, length, self.n_heads * self.d_v))",
             "Concat(head_1..head_h) by a reshape of (batch, h, n, d_v) without the transpose"),
    Mutation("causal-mask-hides-diagonal", "repro/model/masks.py",
     "    return torch.ones(length, length, dtype=torch.bool, device=device).tril()[None, None]",
     "    return torch.ones(length, length, dtype=torch.bool, device=device).tril(-1)[None, None]",
             "the causal mask lets position i see positions < i only (not itself)"),
    Mutation("positional-exponent-i-over-d", "repro/model/positional.py",
     "    inv_freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model))",
     "    inv_freq = torch.exp(torch.arange(0, d_model // 2, dtype=torch.float64) * (-math.log(10000.0) / d_model))",
             "PE's exponent i / d_model instead of 2i / d_model (wavelengths up to 100 * 2 pi at d_model 512)"),
    Mutation("positional-ignores-offset", "repro/model/positional.py",
     "        return self.table[offset : offset + length]", "        return self.table[:length]",
             "the sinusoids ignore the cache's offset: every incremental step is encoded as position 0"),
    Mutation("embedding-divided-by-sqrt-d-model", "repro/model/embedding.py",
     "        self.scale = math.sqrt(d_model)", "        self.scale = 1 / math.sqrt(d_model)",
             "embeddings multiplied by d_model^-0.5 instead of sqrt(d_model)"),
    Mutation("source-target-embeddings-separate", "repro/model/transformer.py",
     "        self.tgt_embed = self.src_embed if cfg.share_embeddings else ScaledEmbedding(",
     "        self.tgt_embed = ScaledEmbedding(cfg.tgt_vocab_size, cfg.d_model, cfg.pad_id) if cfg.share_embeddings else ScaledEmbedding(",
             "the output projection tied to the target embedding, but the source embedding is a separate matrix"),
    Mutation("output-projection-with-bias", "repro/model/transformer.py",
     "        self.output_projection = nn.Linear(cfg.d_model, cfg.tgt_vocab_size, bias=False)",
     "        self.output_projection = nn.Linear(cfg.d_model, cfg.tgt_vocab_size, bias=True)",
             "the tied pre-softmax projection given a bias of its own"),
    Mutation("ffn-without-b1", "repro/model/feedforward.py",
     "        self.w_1 = nn.Linear(d_model, d_ff)", "        self.w_1 = nn.Linear(d_model, d_ff, bias=False)",
             "Eq. 2 without its first bias b_1"),
    Mutation("encoder-sublayers-share-norm", "repro/model/layers.py",
     "        return self.sublayers[1](x, self.feed_forward)", "        return self.sublayers[0](x, self.feed_forward)",
             "the encoder's two sub-layers share one LayerNorm (and dropout)"),
    Mutation("cross-attention-shares-self-attention", "repro/model/layers.py",
     "            x, lambda y: self.cross_attn(y, memory, memory, src_mask, cache=cross_cache, static_kv=True)",
     "            x, lambda y: self.self_attn(y, memory, memory, src_mask, cache=cross_cache, static_kv=True)",
             "the decoder's encoder-decoder attention runs the self-attention's projections"),
    Mutation("dropout-on-residual-sum", "repro/model/layers.py",
     "        return self.norm(x + self.dropout(y := sublayer(x))).to(y.dtype)", "        return self.norm(self.dropout(x + (y := sublayer(x)))).to(y.dtype)",
             "dropout applied to the residual sum x + Sublayer(x), not to the sub-layer's output"),
    Mutation("dropout-before-positions-added", "repro/model/transformer.py",
     "        return self.embed_dropout(embed(tokens) + pos(tokens.size(1), offset))",
     "        return self.embed_dropout(embed(tokens)) + pos(tokens.size(1), offset)",
             "dropout on the embeddings alone, the positional encodings added after it"),
    Mutation("final-decoder-norm", "repro/model/transformer.py",
     "        self.decoder_norm = nn.LayerNorm(cfg.d_model) if cfg.norm_first else nn.Identity()",
     "        self.decoder_norm = nn.LayerNorm(cfg.d_model)",
             "a LayerNorm at the top of the post-norm decoder (not in the paper)"),
    Mutation("decoder-self-attention-no-padding-mask", "repro/model/transformer.py",
     "            tgt_mask = causal_mask(length, tgt_in.device) & padding_mask(tgt_in, self.cfg.pad_id)",
     "            tgt_mask = causal_mask(length, tgt_in.device)",
             "the decoder's self-attention masks the future but not the target padding",
             equivalent="targets are padded on the right: for every real query i the causal mask already hides every key j > i, "
             "PAD keys included; only PAD queries, whose outputs no loss, perplexity or search reads, see PAD keys "
             "(the fused path relies on the same fact)"),
    Mutation("warmup-step-from-zero", "repro/train/schedule.py",
     "    return scale * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)",
     "    return scale * d_model**-0.5 * min(step**-0.5, (step - 1) * warmup_steps**-1.5)",
             "Eq. 3's warm-up branch counts steps from 0 (the first update's rate is 0)"),
    Mutation("adamw-weight-decay", "repro/train/optimizer.py",
     "    return torch.optim.Adam(params, lr=0.0, betas=betas, eps=eps, **({\"fused\": True} if fused else {}))",
     "    return torch.optim.AdamW(params, lr=0.0, betas=betas, eps=eps, **({\"fused\": True} if fused else {}))",
             "AdamW (torch's default weight decay 0.01) instead of Adam: the betas and epsilon are right"),
    Mutation("fused-smoothing-over-v", "repro/train/loss.py",
     "        off = epsilon / (vocab - 2)", "        off = epsilon / vocab",
             "the fused loss spreads eps / V on each other token (a mass of eps (V - 2) / V, not eps)"),
    Mutation("loss-over-padded-positions", "repro/train/update_step.py",
     "    tokens = _all_reduce(_on(device, [sum(b.src_tokens for b in micro), sum(b.tgt_tokens for b in micro)]))",
     "    tokens = _all_reduce(_on(device, [sum(b.src_tokens for b in micro), sum(b.tgt_out.numel() for b in micro)]))",
             "the update's loss divided by its padded target positions, not its target tokens"),
    Mutation("bos-is-eos", "repro/data/batching.py",
     "    tgt_in[:, 0] = BOS", "    tgt_in[:, 0] = EOS",
             "the decoder input starts with EOS (fairseq's habit) while the search starts from BOS"),
    Mutation("targets-without-eos", "repro/data/batching.py",
     "    tgt_out[np.arange(n), tgt_lens] = EOS", "    tgt_out[np.arange(n), tgt_lens] = PAD",
             "the decoder is never trained to predict EOS (tgt_out = y, padded)"),
    Mutation("beam-all-rows-live", "repro/decode/beam.py",
     "    scores[:, 0] = 0.0                                               # one live hypothesis to start with",
     "    scores[:, :] = 0.0                                               # one live hypothesis to start with",
             "the search starts with k live copies of the empty hypothesis (the beam fills with duplicates)"),
    Mutation("beam-final-score-unnormalised", "repro/decode/beam.py",
     "        done_s = (top_s / lp).masked_fill(~counted, float(\"-inf\"))   # this step's finished hypotheses",
     "        done_s = top_s.masked_fill(~counted, float(\"-inf\"))   # this step's finished hypotheses",
             "finished hypotheses compared by log P alone: the length penalty never applied"),
    Mutation("length-penalty-1-plus-length", "repro/decode/beam.py",
     "    return ((5.0 + length) / 6.0) ** alpha", "    return ((1.0 + length) / 6.0) ** alpha",
             "GNMT's lp with 1 + |Y| instead of 5 + |Y|"),
    Mutation("bleu-last-ngram-dropped", "repro/eval/bleu.py",
     "            hyp_ngrams = Counter(tuple(words[k : k + n]) for k in range(len(words) - n + 1))",
     "            hyp_ngrams = Counter(tuple(words[k : k + n]) for k in range(len(words) - n))",
             "each hypothesis's last n-gram of every order left out of BLEU's counts"),
    Mutation("bleu-aggressive-dash-split", "repro/eval/bleu.py",
     "    return _moses(lang).tokenize(line, return_str=True, escape=True, aggressive_dash_splits=False)",
     "    return _moses(lang).tokenize(line, return_str=True, escape=True, aggressive_dash_splits=True)",
             "tokenizer.perl run with -a (hyphens split to @-@ before the ##AT## compound split)"),
    Mutation("perplexity-without-eos", "repro/eval/perplexity.py",
     "            tokens += out.tokens", "            tokens += out.tokens - len(batch)",
             "perplexity's per-wordpiece mean leaves the closing EOS out of the count (not of the NLL)"),
    Mutation("collins-prm-scores-quotes", "repro/eval/evalb_params.py",
     "    delete_labels=(\"TOP\", \"-NONE-\", \",\", \":\", \"``\", \"''\", \".\"),",
     "    delete_labels=(\"TOP\", \"-NONE-\", \",\", \":\", \".\"),",
             "COLLINS.prm without DELETE_LABEL `` and '' (quotes scored as brackets)"),
    Mutation("loop-eq3-base-d-model", "repro/train/loop.py",
     "                             d_model=self.model_cfg.d_model, warmup_steps=self.cfg.warmup_steps,",
     "                             d_model=512, warmup_steps=self.cfg.warmup_steps,",
             "the loop applies Eq. 3 with the base model's d_model = 512 whatever the model (big: 1.4x its rate)"),
    Mutation("gradients-never-zeroed", "repro/train/update_step.py",
     "    optimizer.zero_grad(set_to_none=True)", "    pass",
             "the gradients are never zeroed: each update adds its gradient to all the earlier ones"),
    Mutation("forced-eos-probability-one", "repro/decode/beam.py",
     "        only_eos[:, EOS] = logp[:, EOS]", "        only_eos[:, EOS] = 0.0",
             "at the output limit the forced EOS is scored with probability 1, not the model's"),
    Mutation("search-softmax-over-rows", "repro/decode/stepper.py",
     "        logp = logits.log_softmax(-1)", "        logp = logits.log_softmax(0)",
             "the search's log-probabilities normalised over the hypotheses (dim 0), not the vocabulary"),
    Mutation("value-projection-sized-by-d-k", "repro/model/attention.py",
     "        self.w_v = nn.Linear(d_model, n_heads * d_v)", "        self.w_v = nn.Linear(d_model, n_heads * d_k)",
             "W^V built d_model x h d_k (the same as h d_v everywhere but Table 3's rows (B))"),
    Mutation("fused-loss-value-over-v-minus-2", "repro/train/loss.py",
     "            others = (vocab - 1) * lse - (z.sum(-1) - z[:, pad_id]) - nll",
     "            others = (vocab - 2) * lse - (z.sum(-1) - z[:, pad_id]) - nll",
             "the fused loss's value sums lse over V - 2 tokens where the sum has V - 1 terms less y (its gradient is right)"),
    Mutation("masked-scores-minus-1e9", "repro/model/attention.py",
     "        scores = scores.masked_fill(~mask, float(\"-inf\"))", "        scores = scores.masked_fill(~mask, -1e9)",
             "masked scores set to -1e9 instead of -inf (the Annotated Transformer's habit)",
             equivalent="exp(-1e9 - max) is exactly 0 in fp32 and bf16, so a masked key weighs 0 as with -inf; the two differ only "
             "on a row whose every key is masked, which no path forms (each query sees itself or a real source token)"),
    Mutation("bleu-closest-reference-tie-longer", "repro/eval/bleu.py",
     "        closest = min(ref_words, key=lambda r: (abs(len(r) - len(words)), len(r)))",
     "        closest = min(ref_words, key=lambda r: (abs(len(r) - len(words)), -len(r)))",
             "multi-bleu's closest reference length breaks ties to the longer reference",
             equivalent="the paper's protocol scores against one reference (nrefs:1): the closest length is that reference's, "
             "whatever the tie rule"),
    Mutation("perplexity-with-smoothing", "repro/eval/perplexity.py",
     "                                      epsilon=0.0, pad_id=model.cfg.pad_id, accuracy=True)",
     "                                      epsilon=0.1, pad_id=model.cfg.pad_id, accuracy=True)",
             "the evaluation's loss call keeps the training's label smoothing",
             equivalent="perplexity reads nll_sum (-log p(y) summed), which the loss computes whatever epsilon; epsilon changes only "
             "the smoothed loss, which the evaluation does not read"),
    Mutation("beam-memory-rows-tiled", "repro/decode/beam.py",
     "    rows = torch.arange(batch, device=device).repeat_interleave(k)",
     "    rows = torch.arange(batch, device=device).repeat(k)",
             "the encoder output tiled (0, 1, 0, 1, ...) for the beam rows laid out (0, 0, 1, 1, ...): hypotheses attend to other sentences"),
    Mutation("translations-put-back-by-sorted-index", "repro/decode/translate.py",
     "        for i, hyp in zip(batch, hyps):", "        for i, hyp in zip(sorted(batch), hyps):",
             "each decoding batch's outputs put back in the order of the sentences' indices, not the batch's (length) order"),
    Mutation("bleu-tokenized-as-source-language", "repro/eval/translation.py",
     "    paper_kwargs = {\"lang\": dataset.tgt_lang}", "    paper_kwargs = {\"lang\": dataset.src_lang}",
             "the evaluation's tokenized BLEU runs tokenizer.perl with the source language (-l en on German output)"),
    Mutation("embedding-dropout-fixed-at-0.1", "repro/model/transformer.py",
     "        self.embed_dropout = nn.Dropout(cfg.dropout)", "        self.embed_dropout = nn.Dropout(0.1)",
             "the dropout on the embeddings plus positions written in at 0.1, whatever the job's P_drop (big EN-DE: 0.3)"),
    Mutation("decoder-dropout-fixed-at-0.1", "repro/model/layers.py",
     "        self.sublayers = nn.ModuleList(SublayerConnection(cfg.d_model, cfg.dropout, cfg.norm_first) for _ in range(3))",
     "        self.sublayers = nn.ModuleList(SublayerConnection(cfg.d_model, 0.1, cfg.norm_first) for _ in range(3))",
             "the decoder's sub-layers drop at 0.1 whatever the job's P_drop (big EN-DE: 0.3)"),
]


#: Machinery mistakes (issue 45: the test suite, not `repro check`, must catch them).
SUITE_MUTATIONS = [
    SuiteMutation("observed-log-repeats-a-step", "repro/checks/observed_records.py",
     "        if before is not None and row.step <= before.step:",
     "        if before is not None and row.step < before.step:",
                  "a metrics log that holds one update twice is read as written by the run",
                  ("tests/observed/test_run_check.py",)),
    SuiteMutation("observed-sessions-against-wrong-field", "repro/checks/observed_records.py",
     "        if i and session[\"resumed_from\"] < found[i - 1][\"ended_at\"]:",
     "        if i and session[\"resumed_from\"] < found[i - 1][\"resumed_from\"]:",
                  "a session that resumed before the one before it ended (overlapping sessions) passes",
                  ("tests/observed/test_run_check.py",)),
    SuiteMutation("observed-kept-skips-the-one-before-last", "repro/checks/observed_records.py",
     "        written = range((since // every + 1) * every, steps[-1], every)",
     "        written = range((since // every + 1) * every, steps[-1] - every, every)",
                  "the checkpoint just before the newest may be missing unnoticed",
                  ("tests/observed/test_run_check.py",)),
    SuiteMutation("observed-evaluation-one-update-past", "repro/checks/observed_records.py",
     "        if isinstance(evaluated, int) and steps is not None and evaluated > steps:",
     "        if isinstance(evaluated, int) and steps is not None and evaluated > steps + 1:",
                  "an evaluation of one update more than the run made counts as the run's",
                  ("tests/observed/test_run_check.py",)),
    SuiteMutation("observed-stated-model-without-d-ff", "repro/checks/observed_records.py",
     "STATED_MODEL = (\"n_layers\", \"d_model\", \"d_ff\", \"n_heads\", \"d_k\", \"d_v\", \"dropout\")",
     "STATED_MODEL = (\"n_layers\", \"d_model\", \"n_heads\", \"d_k\", \"d_v\", \"dropout\")",
                  "a checkpoint whose d_ff is not its recipe's is read as the recipe's model",
                  ("tests/observed/test_run_check.py",)),
    SuiteMutation("stack-factor-absolute-tolerance", "repro/checks/stack_embedding.py",
     "    if scale == 0.0 or residual > MULTIPLE_TOLERANCE * scale:",
     "    if scale == 0.0 or residual > MULTIPLE_TOLERANCE:",
                  "the multiple's residual compared with an absolute 1e-4, not a share of the difference",
                  ("tests/audit/test_issue43_unseen_layouts.py",)),
    SuiteMutation("stack-factor-inverted", "repro/checks/stack_embedding.py",
     "    factor = ((d * r).sum() / (r * r).sum()).item()",
     "    factor = ((d * r).sum() / (d * d).sum()).item()",
                  "the stack's factor fitted the wrong way round (1 / f)",
                  ("tests/audit/test_issue43_unseen_layouts.py",)),
    SuiteMutation("step-clock-warmup-one-short", "repro/train/step_clock.py",
     "        steady[:warm] = False", "        steady[:warm - 1] = False",
                  "the last warm-up update counted as steady",
                  ("tests/train/test_step_clock.py",)),
    SuiteMutation("run-lock-file-left-behind", "repro/run_lock.py",
     "            remove(path, within=folder)", "            pass",
                  "the run directory's lock file is left behind when the run ends",
                  ("tests/train/test_run_lock.py",)),
    SuiteMutation("store-conflict-ignores-status", "repro/results/store.py",
     "    return not same(a.measured, b.measured) or a.status != b.status",
     "    return not same(a.measured, b.measured)",
                  "two records of one measurement that differ only in their verdict are no conflict",
                  ("tests/results/test_conflicts.py",)),
    SuiteMutation("store-conflict-ignores-seed", "repro/results/store.py",
     "    if a.provenance.scale != b.provenance.scale or a.extra.get(\"seed\") != b.extra.get(\"seed\"):",
     "    if a.provenance.scale != b.provenance.scale:",
                  "two seeds' records of one claim are taken for a conflict",
                  ("tests/results/test_conflicts.py",)),
    SuiteMutation("job-path-fixed-batch-both-sides", "repro/benchmarks/job_path.py",
     "        per_side = statistics.mean(job_tokens) / 2", "        per_side = statistics.mean(job_tokens)",
                  "the job-path benchmark's fixed batch holds the update's tokens on each side (twice the job's)",
                  ("tests/benchmarks/test_job_path.py",)),
]


def apply(mutation: Mutation, tree: Path) -> None:
    path = tree / mutation.file
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    hits = [i for i, line in enumerate(lines) if line == mutation.old]
    if len(hits) != 1:
        raise SystemExit(f"{mutation.name}: expected the line once in {mutation.file}, found it {len(hits)} times")
    lines[hits[0]] = mutation.new
    path.write_text("\n".join(lines), encoding="utf-8")


def run_check(tree: Path, claims: Sequence[str] = ()) -> tuple[int | None, list[str], float]:
    """`repro check` on the package in ``tree`` (only the claims whose ids start with ``claims``, when
    given): exit code (None: it ran past 15 minutes), the claims that failed or erred, seconds."""
    env = {**os.environ, "PYTHONPATH": str(tree), "REPRO_CLAIMS_DIR": str(tree / "claims"),
           "REPRO_SLURM_PROFILES": str(ROOT / "slurm"),
           "REPRO_DATA_DIR": os.environ.get("REPRO_DATA_DIR", str(ROOT.parent / "shared" / "data"))}
    out = tree / "check.json"
    began = time.monotonic()
    only = [arg for prefix in claims for arg in ("--only", prefix)]
    try:
        proc = subprocess.run([sys.executable, "-m", "repro", "check", "--json", str(out), *only], cwd=tree, env=env,
                              capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired:   # a check that hangs has caught nothing (no exit code); the other rows go on
        return None, ["(timed out after 900 s)"], time.monotonic() - began
    seconds = time.monotonic() - began
    broken = []
    if out.is_file():
        broken = [r["id"] for r in json.loads(out.read_text()) if r["status"] in ("fail", "error")]
    elif proc.returncode:
        broken = [f"(no records: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else 'crashed'})"]
    return proc.returncode, broken, seconds


def run_suite(mutation: SuiteMutation) -> tuple[int, float]:
    """The test files of ``mutation`` (one worker, stopping at the first failure) on a copy of the
    project with the mistake in it: pytest's exit code, seconds."""
    with tempfile.TemporaryDirectory(prefix="repro-suite-mutations-") as tmp:
        tree = Path(tmp) / mutation.name
        for part in ("repro", "tests", "claims", "slurm"):
            shutil.copytree(ROOT / part, tree / part, ignore=shutil.ignore_patterns("__pycache__"), symlinks=True)
        shutil.copy2(ROOT / "pyproject.toml", tree / "pyproject.toml")
        apply(mutation, tree)
        began = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-n", "1", *mutation.tests], cwd=tree,
                              env={**os.environ, "PYTHONPATH": str(tree)}, capture_output=True, text=True,
                              timeout=1800)
        return proc.returncode, time.monotonic() - began


def main_suite(names: Sequence[str]) -> int:
    """``--suite``: each machinery mistake against its test files (those named, else all)."""
    chosen = [m for m in SUITE_MUTATIONS if not names or m.name in names]
    caught = 0
    for mutation in chosen:
        code, seconds = run_suite(mutation)
        caught += code != 0
        print(f"{'caught' if code else 'MISSED':7s} {mutation.name:42s} {seconds:5.1f} s  {' '.join(mutation.tests)}",
              flush=True)
    print(f"the test suite caught {caught} of {len(chosen)} machinery mistakes")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "mutations.json")
    parser.add_argument("--only", action="append", default=[], help="run only these mutations (by name)")
    parser.add_argument("--shard", default="1/1", help="I/N: run every N-th mutation from the I-th (parallel runs); "
                        "a shard writes its rows to --out, and --merge joins the shards into the record")
    parser.add_argument("--merge", nargs="+", type=Path, default=[], help="shard files to join into --out")
    parser.add_argument("--append", action="store_true",
                        help="add the rows of the mutations run (--only, or those the record lacks) to the record "
                             "in --out, each row with the commit it ran at")
    parser.add_argument("--claims", action="append", default=[],
                        help="run `repro check --only` these claim id prefixes instead of every claim (a machine too "
                             "loaded for the full check); each row then lists them under 'check_only'")
    parser.add_argument("--suite", action="store_true",
                        help="run the machinery mistakes (SUITE_MUTATIONS, --only to choose) against their test "
                             "files instead of repro check")
    args = parser.parse_args(argv)
    if args.suite:
        return main_suite(args.only)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    if args.merge:
        shards = [json.loads(p.read_text(encoding="utf-8")) for p in args.merge]
        if len({s["commit"] for s in shards}) != 1:
            raise SystemExit(f"the shards ran at different commits: {sorted({s['commit'] for s in shards})}")
        order = {m.name: i for i, m in enumerate(MUTATIONS)}
        rows = sorted((r for s in shards for r in s["rows"]), key=lambda r: order.get(r["name"], len(order)))
        if sorted(r["name"] for r in rows) != sorted(order):
            raise SystemExit("the shards do not hold every mutation exactly once")
        summary = {"caught": sum(r["caught"] for r in rows), "mutations": len(rows), "commit": shards[0]["commit"],
                   "rows": rows}
        args.out.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
        print(f"repro check caught {summary['caught']} of {len(rows)} one-line mistakes")
        return 0
    index, count = (int(x) for x in args.shard.split("/"))
    record = json.loads(args.out.read_text(encoding="utf-8")) if args.append and args.out.is_file() else None
    known = {r["name"] for r in record["rows"]} if record else set()
    chosen = [m for m in MUTATIONS if (m.name in args.only if args.only else m.name not in known)]
    chosen = chosen[index - 1::count]
    rows = []
    with tempfile.TemporaryDirectory(prefix="repro-mutations-") as tmp:
        for mutation in chosen:
            tree = Path(tmp) / mutation.name
            shutil.copytree(ROOT / "repro", tree / "repro", ignore=shutil.ignore_patterns("__pycache__"))
            shutil.copytree(ROOT / "claims", tree / "claims")
            apply(mutation, tree)
            code, broken, seconds = run_check(tree, args.claims)
            caught = code is not None and code != 0
            fields = {k: v for k, v in asdict(mutation).items() if k != "equivalent" or v}
            rows.append({**fields, "caught": caught, "exit_code": code, "claims": broken,
                         "seconds": round(seconds, 1), **({"check_only": args.claims} if args.claims else {})})
            print(f"{'caught' if caught else 'MISSED':7s} {mutation.name:42s} {seconds:5.1f} s  {', '.join(broken[:4])}",
                  flush=True)
            shutil.rmtree(tree)
    if record is not None:   # rows added to a record made at another commit: each says its own
        rows = [r for r in record["rows"] if r["name"] not in {m.name for m in chosen}] + \
               [{**r, "commit": commit} for r in rows]
        order = {m.name: i for i, m in enumerate(MUTATIONS)}
        rows.sort(key=lambda r: order.get(r["name"], len(order)))
    caught = sum(r["caught"] for r in rows)
    summary = {"caught": caught, "mutations": len(rows), "commit": record["commit"] if record else commit, "rows": rows}
    if record is not None or not args.only or count > 1:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(f"repro check caught {caught} of {len(rows)} one-line mistakes")
    if len(rows) < len(MUTATIONS) and not args.only and count == 1:
        print(f"the record lacks {len(MUTATIONS) - len(rows)} mutations: run with --append")
    return 0


if __name__ == "__main__":
    sys.exit(main())
