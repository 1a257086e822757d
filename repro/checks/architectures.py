"""Every architecture repro's jobs build, decoded as the evaluation decodes it.

``impl.incremental-decoding`` watches the models the audit builds (sinusoids, h = 4, d_k = d_v); the
jobs also build Table 3's other rows (learned positions, one head, 32 heads, d_k apart from d_v, more
layers), the big model and the parser. A part of the incremental decoder only one of them runs (row
(E)'s learned table read at the cache's offset) is seen by no other claim. Here each named architecture
(:data:`repro.model.presets.PRESETS`) is built at a small width keeping what sets it apart, and the
search's own step (:class:`repro.decode.stepper.Stepper`) gives the next-token log-probabilities of
a growing prefix through the key/value cache and by recomputing the prefix: they must agree.
"""

from __future__ import annotations

import torch

from repro.checks.jobs import own
from repro.checks.registry import checker
from repro.claims.claim import Claim
from repro.claims.compare import Worst, max_abs_diff
from repro.claims.outcome import CheckContext, Measurement
from repro.claims.seeding import claim_seed, seeded
from repro.data.vocab import BOS, PAD
from repro.decode.stepper import Stepper
from repro.model import Transformer, TransformerConfig
from repro.model.presets import PRESETS

#: The small width every architecture is built at (each d_k and d_v scaled with it, at least 1).
WIDTH, VOCAB, LAYERS = 32, 40, 2
#: Decoding steps compared (the cache's offset runs from 0 to STEPS - 1).
STEPS = 6


def small(cfg: TransformerConfig) -> TransformerConfig:
    """``cfg`` at d_model :data:`WIDTH`: its heads, positional encoding, P_drop and the ratios of
    d_k and d_v to d_model kept; at most :data:`LAYERS` layers, a small vocabulary and table."""
    factor = cfg.d_model / WIDTH
    return cfg.replace(d_model=WIDTH, d_ff=2 * WIDTH, n_layers=min(cfg.n_layers, LAYERS), src_vocab_size=VOCAB,
                       tgt_vocab_size=VOCAB, max_positions=64, d_k=max(1, round(cfg.d_k / factor)),
                       d_v=max(1, round(cfg.d_v / factor)))


def _log_probs(model: Transformer, src: torch.Tensor, prefix: torch.Tensor, use_cache: bool) -> torch.Tensor:
    """The search's log-probabilities after each prefix of ``prefix`` (rows, steps, V), the special ids
    it never emits left out."""
    memory, src_mask = model.encode(src)
    stepper = Stepper(model, memory, src_mask, use_cache, prefix.size(1))
    rows = [stepper.log_probs(prefix[:, :t]) for t in range(1, prefix.size(1) + 1)]
    keep = [i for i in range(rows[0].size(-1)) if i not in (PAD, BOS)]
    return torch.stack(rows, 1)[..., keep]


@checker("decode.cached_every_architecture")
def cached_every_architecture(claim: Claim, ctx: CheckContext) -> Measurement:
    """For each named architecture (every Table 3 row, base, big, the parsers; params.presets to name
    some), built small under a
    seed of its own and in eval mode: the evaluation's decoding step through the cache against the
    same step recomputing every prefix, over a padded batch. Measured: the worst difference of
    log-probabilities over all of them."""
    own(ctx)
    gen = torch.Generator().manual_seed(ctx.seed)
    worst, built = Worst(), {}
    for name in claim.params.get("presets") or list(PRESETS):
        cfg = small(PRESETS[name].model)
        if cfg in built.values():
            continue
        built[name] = cfg
        with seeded(claim_seed(ctx.seed, claim.id, len(built))):
            model = Transformer(cfg).eval()
        src = torch.randint(4, VOCAB, (2, 7), generator=gen)
        src[1, 4:] = PAD
        prefix = torch.cat([torch.full((2, 1), BOS), torch.randint(4, VOCAB, (2, STEPS - 1), generator=gen)], 1)
        with torch.no_grad():
            cached, full = (_log_probs(model, src, prefix, use) for use in (True, False))
        worst.add(max_abs_diff(cached, full, f"the log-probabilities of {name}"), name)
    return Measurement(worst.value, detail=f"worst |cached - recomputed| log-probability {worst.value:.1e} (at "
                       f"{worst.where}) over {len(built)} architectures at d_model {WIDTH}: {', '.join(built)}")
