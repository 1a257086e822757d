"""Checkpoints: atomic writes, clear errors for truncated and foreign files, averaging (Section 6.1)."""

import os
import pickle

import pytest
import torch

from repro.errors import CheckpointError
from repro.model import Transformer, TransformerConfig
from repro.train import checkpoint as ckpt
from repro.train.average import average_checkpoints, average_last
from repro.train.checkpoint import checkpoint_path, list_checkpoints, load_checkpoint, save_checkpoint
from repro.train.lineage import FIELDS

CFG = TransformerConfig(src_vocab_size=16, tgt_vocab_size=16, n_layers=1, d_model=8, d_ff=16, n_heads=2)


#: The lineage of a run without a vocabulary or data file (the synthetic corpus's).
NO_FILES = {"lineage": dict.fromkeys(FIELDS)}


def model_state(seed):
    torch.manual_seed(seed)
    return {"model": Transformer(CFG).state_dict(), "model_config": CFG.to_dict(), "step": seed, **NO_FILES}


def test_roundtrip_and_no_temp_files(tmp_path):
    path = save_checkpoint(checkpoint_path(tmp_path, 7), model_state(7))
    assert path.name == "step_00000007.pt" and list_checkpoints(tmp_path) == [path]
    assert os.listdir(path.parent) == [path.name]
    state = load_checkpoint(path)
    assert state["step"] == 7 and torch.equal(state["model"]["src_embed.lut.weight"],
                                              model_state(7)["model"]["src_embed.lut.weight"])


def test_failed_write_keeps_the_old_file(tmp_path, monkeypatch):
    path = save_checkpoint(tmp_path / "a.pt", model_state(1))
    before = path.read_bytes()

    def broken_save(obj, fh):
        fh.write(b"half a checkpoint")
        raise OSError("disk full")

    monkeypatch.setattr(ckpt.torch, "save", broken_save)
    with pytest.raises(OSError):
        save_checkpoint(path, model_state(2))
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["a.pt"]


def test_truncated_checkpoint_names_the_file(tmp_path):
    path = save_checkpoint(tmp_path / "step_00000001.pt", model_state(1))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=r"step_00000001\.pt: not a readable checkpoint"):
        load_checkpoint(path)


def test_foreign_checkpoints_are_refused(tmp_path):
    other = tmp_path / "other.pt"
    torch.save({"state_dict": {"w": torch.zeros(2)}}, other)
    with pytest.raises(CheckpointError, match=r"other\.pt: foreign checkpoint"):
        load_checkpoint(other)
    text = tmp_path / "notes.pt"
    text.write_text("hello")
    with pytest.raises(CheckpointError, match=r"notes\.pt"):
        load_checkpoint(text)
    with pytest.raises(CheckpointError, match=r"missing\.pt: checkpoint file not found"):
        load_checkpoint(tmp_path / "missing.pt")


class Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def test_arbitrary_objects_are_not_unpickled(tmp_path):
    """weights_only=True: a checkpoint smuggling an arbitrary object is refused, not executed."""
    path = tmp_path / "evil.pt"
    torch.save({"format": ckpt.FORMAT, "version": ckpt.VERSION, "model": {}, "model_config": {}, "x": Evil()}, path)
    with pytest.raises(CheckpointError, match=r"evil\.pt"):
        load_checkpoint(path)


def test_averaging_identical_checkpoints_gives_the_same_model(tmp_path):
    for step in (1, 2, 3):
        save_checkpoint(checkpoint_path(tmp_path, step), model_state(5))
    avg = average_checkpoints(list_checkpoints(tmp_path))
    ref = model_state(5)["model"]
    for key, value in ref.items():
        assert torch.allclose(avg["model"][key], value, atol=1e-7, rtol=0), key
    out = average_last(tmp_path, 3)
    assert load_checkpoint(out)["averaged_from"] == ["step_00000001.pt", "step_00000002.pt", "step_00000003.pt"]


def test_averaging_is_the_mean_of_the_last_k(tmp_path):
    for step in (1, 2, 3):
        save_checkpoint(checkpoint_path(tmp_path, step), model_state(step))
    out = average_last(tmp_path, 2)
    avg = load_checkpoint(out)["model"]
    a, b = model_state(2)["model"], model_state(3)["model"]
    key = "encoder_layers.0.feed_forward.w_1.weight"
    assert torch.allclose(avg[key], (a[key] + b[key]) / 2)
    assert not torch.allclose(avg[key], (model_state(1)["model"][key] + b[key]) / 2)


def test_averaging_refuses_mismatched_checkpoints(tmp_path):
    save_checkpoint(tmp_path / "a.pt", model_state(1))
    other = CFG.replace(d_ff=32)
    torch.manual_seed(0)
    save_checkpoint(tmp_path / "b.pt", {"model": Transformer(other).state_dict(), "model_config": CFG.to_dict(),
                                        **NO_FILES})
    with pytest.raises(CheckpointError, match=r"b\.pt: parameter '.*' has shape"):
        average_checkpoints([tmp_path / "a.pt", tmp_path / "b.pt"])
    # every checkpoint's configuration is compared with the first's, the second included
    save_checkpoint(tmp_path / "c.pt", {**model_state(2), "model_config": other.to_dict()})
    save_checkpoint(tmp_path / "d.pt", model_state(3))
    with pytest.raises(CheckpointError, match=r"c\.pt: model configuration differs"):
        average_checkpoints([tmp_path / "a.pt", tmp_path / "c.pt", tmp_path / "d.pt"])
    with pytest.raises(CheckpointError, match="asked to average the last 5"):
        save_checkpoint(checkpoint_path(tmp_path / "run", 1), model_state(1))
        average_last(tmp_path / "run", 5)
