"""Issue 39, item 7 (faults): a full disk or a read-only folder is one line naming the path, exit 2,
and nothing half-written: no partial checkpoint, report or translation, no temporary file left.

The tests run as root, for whom permissions do not block a write; so the faults are made where
the operating system would report them: ``os.fsync``/``tempfile.mkstemp`` raise ENOSPC/EROFS for
the paths under test, in-process.
"""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

import pytest
import torch

from repro.data.vocab import SharedVocab
from repro.model import Transformer, TransformerConfig
from repro.results import Provenance, Result, ResultStore
from repro.train.checkpoint import save_checkpoint
from repro.train.lineage import FIELDS
from tests.cli_run import refusal, run

EN = ["A man rides a bike .", "Two dogs play in the snow .", "A woman reads a book .", "Children run on the beach ."]
DE = ["Ein Mann fährt Fahrrad .", "Zwei Hunde spielen im Schnee .", "Eine Frau liest ein Buch .",
      "Kinder rennen am Strand ."]
TINY_MODEL = '{"n_layers": 1, "d_model": 16, "d_ff": 32, "n_heads": 2, "attention": "fused"}'


def full_disk_for(monkeypatch, match) -> None:
    """``os.fsync`` of a file whose (temporary) name ``match`` accepts fails as on a full disk."""
    real = os.fsync

    def fsync(fd: int) -> None:
        if match(os.readlink(f"/proc/self/fd/{fd}")):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd)
    monkeypatch.setattr(os, "fsync", fsync)


def read_only(monkeypatch, folder: Path) -> None:
    """No file can be created in ``folder`` (a read-only file system)."""
    real = tempfile.mkstemp

    def mkstemp(*args, **kwargs):
        if Path(kwargs.get("dir") or ".").resolve() == folder.resolve():
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(folder))
        return real(*args, **kwargs)
    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)


def leftovers(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.name.endswith(".tmp")]


def test_train_checkpoint_on_a_full_disk(tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    full_disk_for(monkeypatch, lambda name: "step_00000002.pt" in name)
    rc, _, err = run(capsys, "train", "--recipe", "smoke", "--out-dir", str(out), "--max-steps", "2",
                     "--set", "checkpoint_every_steps=1")
    line = refusal(err)
    assert rc == 2 and str(out / "checkpoints" / "step_00000002.pt") in line and "No space left" in line
    assert not (out / "checkpoints" / "step_00000002.pt").exists() and leftovers(out) == []
    assert (out / "checkpoints" / "step_00000001.pt").exists()   # the whole earlier one stays


def test_train_metrics_log_on_a_full_disk(tmp_path, monkeypatch, capsys):
    from repro.train import metrics_log

    out = tmp_path / "run"
    real = metrics_log.MetricsLog.__init__

    def init(self, *args, **kwargs):
        real(self, *args, **kwargs)

        class Full:
            def writerow(self, row):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self._writer = Full()
    monkeypatch.setattr(metrics_log.MetricsLog, "__init__", init)
    rc, _, err = run(capsys, "train", "--recipe", "smoke", "--out-dir", str(out), "--max-steps", "2")
    assert rc == 2 and str(out / "metrics.csv") in refusal(err)


@pytest.fixture()
def multi30k(tmp_path: Path) -> Path:
    folder = tmp_path / "data" / "multi30k"
    folder.mkdir(parents=True)
    for split, n in (("train", 40), ("val", 4), ("test_2016_flickr", 4)):
        (folder / f"{split}.en").write_text("".join(EN[i % 4] + "\n" for i in range(n)))
        (folder / f"{split}.de").write_text("".join(DE[i % 4] + "\n" for i in range(n)))
    return tmp_path / "data"


def test_train_into_a_read_only_encoded_folder(tmp_path, multi30k, monkeypatch, capsys):
    out = tmp_path / "run"
    (out / "encoded").mkdir(parents=True)
    read_only(monkeypatch, out / "encoded")
    rc, _, err = run(capsys, "train", "--recipe", "local", "--data-dir", str(multi30k), "--out-dir", str(out),
                     "--max-steps", "1", "--set", f"model_overrides={TINY_MODEL}", "--set", "vocab_size=300",
                     "--set", "tokens_per_batch=64", "--set", "max_tokens_per_device=64")
    line = refusal(err)
    assert rc == 2 and str(out / "encoded") in line and "Read-only" in line
    assert not (out / "encoded" / "manifest.json").exists() and not (out / "checkpoints").exists()


def test_report_on_a_full_disk(tmp_path, monkeypatch, capsys):
    claims = tmp_path / "claims"
    claims.mkdir()
    (claims / "x.toml").write_text('part = "x"\n[[claim]]\nid = "x.bleu"\nsource = "t"\nstatement = "s"\n'
                                   'kind = "metric"\nscale = "local"\nchecker = "metric.result"\nexpected = 30.0\n'
                                   'bound = "at_least"\nunit = "BLEU"\n')
    store = ResultStore(tmp_path / "results")
    store.write(Result("x.bleu", 31.0, Provenance(commit="c", config_hash="h", hardware="cpu", dataset="d",
                                                  date="2026-01-01T00:00:00+00:00", scale="local: t"), unit="BLEU"))
    out = tmp_path / "out"
    full_disk_for(monkeypatch, lambda name: name.startswith(str(out)) and "report.md" in name)
    rc, _, err = run(capsys, "report", "--results", str(store.root), "--claims-dir", str(claims), "--out", str(out),
                     "--no-attention")
    line = refusal(err)
    assert rc == 2 and str(out / "report.md") in line and not (out / "report.md").exists() and leftovers(out) == []


def test_translate_output_on_a_full_disk(tmp_path, monkeypatch, capsys):
    vocab = SharedVocab.train(EN + DE, 300)
    vocab.save(tmp_path / "vocab.json")
    cfg = TransformerConfig(src_vocab_size=len(vocab), tgt_vocab_size=len(vocab), n_layers=1, d_model=16, d_ff=32,
                            n_heads=2, max_positions=64)
    torch.manual_seed(0)
    ckpt = save_checkpoint(tmp_path / "checkpoints" / "step_00000001.pt",
                           {"step": 1, "model": Transformer(cfg).state_dict(), "model_config": cfg.to_dict(),
                            "lineage": dict.fromkeys(FIELDS)})
    source = tmp_path / "in.en"
    source.write_text("A man reads a book .\n")
    out = tmp_path / "out.de"
    full_disk_for(monkeypatch, lambda name: Path(name).name.startswith(".out.de."))
    rc, _, err = run(capsys, "translate", "--checkpoint", str(ckpt), "--input", str(source), "--output", str(out),
                     "--max-len-offset", "2", "--greedy")
    assert rc == 2 and str(out) in refusal(err) and not out.exists() and leftovers(tmp_path) == []
