"""Fixtures of the claims' tests."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture
def tiny_run():
    """Make a run directory as the local pipeline leaves it (vocab.json, a checkpoint) and the
    stored result naming it: ``tiny_run(folder, same_heads=False)`` -> results."""
    return _tiny_run


def _tiny_run(tmp_path, same_heads: bool = False):
    """A run directory as the local pipeline leaves it (vocab.json, a checkpoint) and the stored result naming it."""
    import datetime as dt

    from repro.checks.attention_maps import FIGURE_SENTENCES
    from repro.data.vocab import WORD_LEVEL, SharedVocab
    from repro.model import Transformer, TransformerConfig
    from repro.results.provenance import Provenance
    from repro.results.store import Result
    from repro.train.checkpoint import save_checkpoint

    vocab = SharedVocab.train(list(FIGURE_SENTENCES.values()) * 2, 80, split=WORD_LEVEL)
    vocab.save(tmp_path / "vocab.json")
    cfg = TransformerConfig(src_vocab_size=len(vocab), tgt_vocab_size=len(vocab), d_model=16, n_heads=4, d_ff=32,
                            n_layers=2, dropout=0.0)
    model = Transformer(cfg)
    if same_heads:  # every head's query and key projections the same: one picture four times
        for layer in model.encoder_layers:
            for w in (layer.self_attn.w_q, layer.self_attn.w_k):
                with torch.no_grad():
                    w.weight.copy_(w.weight[:4].repeat(4, 1))
                    w.bias.zero_()
    save_checkpoint(tmp_path / "average_last5.pt", {"model": model.state_dict(), "model_config": cfg.to_dict()})
    prov = Provenance(commit="0" * 40, config_hash="x", hardware="cpu", dataset="multi30k", scale="local: test",
                      date=dt.datetime.now(dt.timezone.utc).isoformat(),
                      extra={"run_dir": str(tmp_path), "checkpoint": str(tmp_path / "average_last5.pt")})
    return {"local.multi30k.bleu": Result("local.multi30k.bleu", 30.0, prov, unit="BLEU")}
