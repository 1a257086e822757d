"""Many array tasks write results at once: the store loses no record and never shows half of one."""

from __future__ import annotations

import json
import multiprocessing as mp
import time
from pathlib import Path

from repro.results import Provenance, Result, ResultStore

WRITERS, RECORDS = 8, 25


def provenance(writer: int) -> Provenance:
    return Provenance(commit="test", config_hash=f"w{writer}", hardware="cpu", dataset="synthetic",
                      date="2026-01-01T00:00:00+00:00", scale="test")


def write_records(root: str, writer: int, start_at: float) -> None:
    while time.time() < start_at:  # all writers start together
        time.sleep(0.001)
    store = ResultStore(root)
    for i in range(RECORDS):
        store.write(Result("run.concurrency", {"writer": writer, "i": i}, provenance(writer)))


def naive_write(root: str, writer: int, start_at: float) -> None:
    """The bug the store avoids: one file per claim and second, rewritten in place."""
    while time.time() < start_at:
        time.sleep(0.001)
    for i in range(RECORDS):
        path = Path(root) / "run.concurrency" / f"{time.strftime('%Y%m%dT%H%M%S')}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"writer": writer, "i": i}))


def run_writers(target, root: Path) -> None:
    ctx = mp.get_context("fork")
    start_at = time.time() + 0.5
    procs = [ctx.Process(target=target, args=(str(root), w, start_at)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0


def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    run_writers(write_records, tmp_path)
    records = ResultStore(tmp_path).read_all()
    seen = {(r.measured["writer"], r.measured["i"]) for r in records}
    assert len(records) == WRITERS * RECORDS
    assert seen == {(w, i) for w in range(WRITERS) for i in range(RECORDS)}
    assert not list(tmp_path.rglob("*.tmp"))


def test_naive_writers_would_be_caught(tmp_path: Path) -> None:
    run_writers(naive_write, tmp_path)
    assert len(list(tmp_path.rglob("*.json"))) < WRITERS * RECORDS
