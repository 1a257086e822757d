"""The search scores its outputs with the model's trained probabilities (Sections 3.4 and 6.1).

Beam search ranks hypotheses by log P(Y | X) / lp(Y). The log P it sums must be the one the training
objective defines: the same model, the same tied pre-softmax projection (Section 3.4), the same
softmax. A decode path that computes its logits in any other way (a projection scaled like the
embeddings, a temperature, a layer the training objective does not run, another mask) searches
another distribution than the one trained, and no check of the search with a scripted model sees it.
The checker decodes with the evaluation's search on a seeded model and scores the search's own
output with the training objective: the two log-probabilities must agree.
"""

from __future__ import annotations

import torch

from repro.checks.jobs import SIZE, job_config, job_spec, own, shrunk
from repro.checks.registry import checker
from repro.claims.claim import Claim
from repro.claims.compare import finite
from repro.claims.outcome import CheckContext, Measurement
from repro.data.batching import collate
from repro.decode.beam import beam_search
from repro.decode.settings import DecodeSettings
from repro.train.loop import build
from repro.train.loss import TranslationLoss

#: Sources of a few lengths, decoded in one batch (token ids of the small model's vocabulary).
SOURCES = [[5, 9, 12, 7], [20, 6], [11, 30, 8, 14, 25, 9]]


@checker("decode.trained_scores")
def trained_scores(claim: Claim, ctx: CheckContext) -> Measurement:
    """The job's model (:func:`repro.train.loop.build`, seeded, on the small model) searched with the
    job's decoding settings (:func:`repro.decode.beam.beam_search`, what the evaluation's
    ``translate_ids`` calls, cached and batched); each output with its EOS scored by the job's
    training objective (:class:`~repro.train.loss.TranslationLoss`, its NLL, dropout off). Measured:
    the largest |log P of the search - log P of the objective| over the sentences, relative to the
    objective's."""
    own(ctx)
    experiment = claim.params.get("experiment", "table2-base-ende")
    cfg = shrunk(job_config(experiment))
    trainer = build(cfg, [([5, 6], [7, 8])], SIZE["vocab_size"])   # seeded: the loop's initial model
    model = trainer.model.eval()
    settings = DecodeSettings(**job_spec(experiment).decode)   # the settings `repro submit` gives the job
    src = collate([(s, []) for s in SOURCES]).src
    found = beam_search(model, src, beam_size=settings.beam_size, alpha=settings.alpha,
                        max_len_offset=settings.max_len_offset, return_hypotheses=True)
    objective = TranslationLoss(model, cfg.label_smoothing)
    worst, rows = 0.0, []
    with torch.no_grad():
        for source, hyp in zip(SOURCES, found):
            batch = collate([(source, hyp.tokens)])
            _, nll, _ = objective(batch.src, batch.tgt_in, batch.tgt_out)
            trained = -float(finite(nll, "the training objective's NLL of the search's output"))
            searched = float(finite(hyp.log_prob, "the search's log-probability of its output"))
            diff = abs(searched - trained) / max(abs(trained), 1e-12)
            worst = max(worst, diff)
            rows.append(f"{len(hyp.tokens)} tokens + EOS: search {searched:.5f}, objective {trained:.5f}")
    return Measurement(worst, detail=f"beam {settings.beam_size}, alpha {settings.alpha}, input + "
                                     f"{settings.max_len_offset}, on the job's model at d_model {SIZE['d_model']}: "
                                     + "; ".join(rows))
