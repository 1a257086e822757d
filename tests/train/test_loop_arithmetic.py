"""The loop computes exactly the arithmetic of Section 5, whatever its structure.

:func:`reference_parameters` states a run of a recipe as straight-line code: seed, build the
model, the label-smoothed objective and Adam, then for each update set Eq. 3's rate, accumulate
the gradients of the update's passes (each scaled by 1 / the update's target tokens), step.
It was checked against the training loop as it stood before the recipe redesign (commit
e724e95: the same parameters, bit for bit); the loop of today must still match it bit for bit,
on the ``smoke`` recipe (the synthetic corpus) and on a recipe with dropout and smoothing.
"""

from __future__ import annotations

import math
import random

import torch

from repro.data.batching import TokenBatcher
from repro.data.synthetic import SyntheticCorpus
from repro.model import Transformer
from repro.recipes import get_recipe
from repro.train.checkpoint import list_checkpoints, load_checkpoint
from repro.train.config import TrainConfig
from repro.train.loop import train
from repro.train.loss import TranslationLoss


def reference_parameters(cfg: TrainConfig, examples: list, vocab_size: int, *,
                         scale_per_pass: bool = False) -> dict[str, torch.Tensor]:
    """The parameters after ``cfg.max_steps`` updates; ``scale_per_pass`` is a plausible bug
    (each pass normalised by its own target tokens, not the update's) to show the test's teeth."""
    torch.manual_seed(cfg.seed)
    random.seed(cfg.seed)
    model = Transformer(cfg.model_config(vocab_size))
    objective = TranslationLoss(model, cfg.label_smoothing)
    params = list(dict.fromkeys(p for p in model.parameters() if p.requires_grad))  # the shared matrix once
    adam = torch.optim.Adam(params, lr=0.0, betas=(cfg.adam_beta1, cfg.adam_beta2), eps=cfg.adam_eps)
    batches = iter(TokenBatcher(examples, cfg.max_tokens_per_device, shuffle=True, seed=cfg.seed))
    passes = math.ceil(cfg.tokens_per_batch / cfg.max_tokens_per_device)
    d_model = cfg.model_config(vocab_size).d_model
    for step in range(1, cfg.max_steps + 1):
        lr = cfg.lr_scale * d_model**-0.5 * min(step**-0.5, step * cfg.warmup_steps**-1.5)  # Eq. 3
        for group in adam.param_groups:
            group["lr"] = lr
        adam.zero_grad(set_to_none=True)
        micro = [next(batches) for _ in range(passes)]
        scale = 1 / max(sum(b.tgt_tokens for b in micro), 1.0)
        for b in micro:
            loss, _, _ = objective(b.src, b.tgt_in, b.tgt_out, 1 / b.tgt_tokens if scale_per_pass else scale)
            loss.backward()
        adam.step()
    return model.state_dict()


def _final(out_dir) -> dict[str, torch.Tensor]:
    return load_checkpoint(list_checkpoints(out_dir)[-1])["model"]


def test_smoke_run_is_bit_identical_to_the_reference(tmp_path):
    torch.set_num_threads(1)
    cfg = get_recipe("smoke").replace(out_dir=str(tmp_path / "run"), max_steps=12).train
    train(cfg, log=lambda _msg: None)
    want = reference_parameters(cfg, SyntheticCorpus().examples(cfg.vocab_size, cfg.seed), cfg.vocab_size)
    got = _final(tmp_path / "run")
    assert want.keys() == got.keys()
    assert all(torch.equal(want[k], got[k]) for k in want), [k for k in want if not torch.equal(want[k], got[k])]


def test_dropout_and_smoothing_run_is_bit_identical_to_the_reference(tmp_path):
    """Dropout draws from the seeded RNG in a fixed order: a loop that consumed the RNG
    differently (another build order, an extra draw) would land elsewhere."""
    torch.set_num_threads(1)
    cfg = get_recipe("smoke").replace(out_dir=str(tmp_path / "run"), max_steps=8, dropout=0.1,
                                      label_smoothing=0.1, seed=7).train
    train(cfg, log=lambda _msg: None)
    want = reference_parameters(cfg, SyntheticCorpus().examples(cfg.vocab_size, cfg.seed), cfg.vocab_size)
    got = _final(tmp_path / "run")
    assert all(torch.equal(want[k], got[k]) for k in want)


def test_the_reference_has_teeth(tmp_path):
    """Scaling by the pass's own tokens instead of the update's would not be bit-identical."""
    torch.set_num_threads(1)
    cfg = get_recipe("smoke").replace(out_dir=str(tmp_path / "run"), max_steps=4).train
    train(cfg, log=lambda _msg: None)
    examples = SyntheticCorpus().examples(cfg.vocab_size, cfg.seed)
    wrong = reference_parameters(cfg, examples, cfg.vocab_size, scale_per_pass=True)
    got = _final(tmp_path / "run")
    assert not all(torch.equal(wrong[k], got[k]) for k in wrong)
