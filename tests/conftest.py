"""Shared fixtures. Real data comes from ``../shared/data`` beside the checkout, or ``REPRO_DATA_DIR``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from repro.model import precision
from repro.selftest.toy_data import toy_translation_data
from tests.fake_accelerator import FakeAccelerator

REPO_ROOT = Path(__file__).resolve().parents[1]

# The audit plugin's tests run pytest inline (tests/audit/test_plugin.py).
pytest_plugins = ["pytester"]


def _threads_per_worker() -> int | None:
    """Under pytest-xdist each worker gets its share of the cores: ``-n auto`` on 2 cores is two
    workers, and torch's default of one thread per core in each would run four threads on two cores,
    spinning against each other. None outside xdist or where the threads are set already."""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if not workers or not workers.isdigit() or "OMP_NUM_THREADS" in os.environ:
        return None
    return max(1, (os.cpu_count() or 1) // int(workers))


_THREADS = _threads_per_worker()
if _THREADS is not None:
    os.environ["OMP_NUM_THREADS"] = str(_THREADS)   # the subprocesses a test starts (the CLI, SLURM jobs)
    torch.set_num_threads(_THREADS)


def shared_data_dir() -> Path:
    env = os.environ.get("REPRO_DATA_DIR")
    return Path(env) if env else REPO_ROOT.parent / "shared" / "data"


@pytest.fixture(autouse=True)
def auto_precision_is_fp32(monkeypatch, tmp_path_factory):
    """``--precision auto`` resolves to fp32 in the tests on every CPU: many compare the loop, the
    loss or the search with fp32 references, and CI machines differ (some have AMX bf16). The
    precision tests inject their own probe; the bf16 paths are tested with ``bf16`` asked for.
    The probe's cache is the test's own, never the machine's nor another test's (``$REPRO_CACHE_DIR``):
    a subprocess a test starts probes for real, and its rates must not reach the next test."""
    monkeypatch.setenv("REPRO_CACHE_DIR", str(tmp_path_factory.mktemp("probe-cache")))
    monkeypatch.setattr(precision, "matmul_probe", lambda device="cpu", **_: (1.0, 0.0))
    precision._cached_probe.cache_clear()
    yield
    precision._cached_probe.cache_clear()


class ComputeDevice:
    """What a device-parametrised test runs on: ``name`` for the project (``cpu`` or ``cuda``) and,
    on the fake accelerator, the :class:`~tests.fake_accelerator.FakeAccelerator` counting syncs."""

    def __init__(self, case: str, name: str, fake: FakeAccelerator | None = None) -> None:
        self.case, self.name, self.fake = case, name, fake

    def __repr__(self) -> str:
        return self.case


@pytest.fixture(params=["cpu", "fake-cuda", pytest.param("cuda", marks=pytest.mark.cuda)])
def device(request) -> ComputeDevice:
    """The CPU; the fake accelerator (always: CUDA's device rules on a CPU build of torch); a real
    GPU (only where one is present, marked ``cuda``)."""
    if request.param == "cpu":
        yield ComputeDevice("cpu", "cpu")
    elif request.param == "fake-cuda":
        with FakeAccelerator() as fake:
            yield ComputeDevice("fake-cuda", "cuda", fake)
    else:
        if not torch.cuda.is_available():
            pytest.skip("no CUDA device here")
        yield ComputeDevice("cuda", "cuda")


@pytest.fixture
def fake_gpu() -> FakeAccelerator:
    """The fake accelerator alone (tests that count host syncs or check device rules)."""
    with FakeAccelerator() as fake:
        yield fake


@pytest.fixture(scope="session")
def data_dir() -> Path:
    path = shared_data_dir()
    if not path.is_dir():
        pytest.fail(f"data directory {path} not found: set REPRO_DATA_DIR or place shared/data beside the checkout")
    return path


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def tiny_multi30k(data_dir: Path):
    """A factory: ``tiny_multi30k(out, {"train": 200, "dev": 10, "test": 10})``."""
    return lambda out, sizes: write_tiny_multi30k(data_dir, out, sizes)


def write_tiny_multi30k(data_dir: Path, out: Path, sizes: dict[str, int]) -> Path:
    """A small dataset folder ``out/{train,dev,test}.{en,de}`` cut from Multi30k's train, val and
    test_2016_flickr (the first ``sizes[split]`` pairs), readable by the data registry."""
    return toy_translation_data(data_dir, out, sizes)


#: Two gold trees, for tests of the parsing data and scoring.
TWO_TREES = ("(S (NP (DT the) (NN cat)) (VP (VBZ sleeps)) (. .))",
             "(S (NP (PRP it)) (VP (VBZ rains) (ADVP (RB hard))) (, ,))")


@pytest.fixture
def tiny_parsing_data(tmp_path: Path) -> Path:
    """A folder laid out as repro.parsing.prepare writes it, every split holding :data:`TWO_TREES`."""
    from nltk import Tree

    from repro.parsing.linearize import linearize
    from repro.parsing.trees import write_tree_lines

    trees = [Tree.fromstring(s) for s in TWO_TREES]
    out = tmp_path / "parsing-data"
    out.mkdir()
    for split in ("train", "dev", "test"):
        (out / f"{split}.src").write_text("".join(" ".join(t.leaves()) + "\n" for t in trees))
        (out / f"{split}.tgt").write_text("".join(linearize(t) + "\n" for t in trees))
        (out / f"{split}.trees").write_text(write_tree_lines(trees))
    return out


@pytest.fixture
def registry_calls(monkeypatch) -> list:
    """Every call of the measurement registry (repro.measures) in the test, as (result id, measure,
    the device of the runtime it measured on (None without a model), what it returned): each registered
    measurement is wrapped, so a job that measures by other code than the registry's is seen to make no call."""
    from repro.measures import MEASUREMENTS

    calls: list = []

    def spy(name, original):
        def measure(trained, request):
            found = original(trained, request)
            device = str(trained.runtime.device) if trained.model is not None else None
            calls.append((request.result_id, name, device, found))
            return found
        return measure

    for name, original in list(MEASUREMENTS.items()):
        monkeypatch.setitem(MEASUREMENTS, name, spy(name, original))
    return calls


@pytest.fixture(scope="session")
def h100_job_data(data_dir: Path, tmp_path_factory):
    """The WMT sample prepared as ``repro submit table2-base-ende --cluster h100-x1`` prepares it (its
    37000-word BPE, its length filter): (the job's config on the CPU, the prepared data), made once."""
    from repro.benchmarks.job_path import job_config_for
    from repro.train.data import prepare_training_data

    cfg = job_config_for("cpu", False, tmp_path_factory.mktemp("h100-job"), data_dir=str(data_dir), compile="on",
                         precision="bf16")
    return cfg, prepare_training_data(cfg)
