"""A job's compiled graphs and kernels are kept where the next job on the machine finds them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch._functorch.config as aot_config
import torch._inductor.config as inductor_config

from repro.train.compile_cache import compile_cache_dir, use_compile_cache


@pytest.fixture
def no_inductor_dir(monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "placeholder")   # restored (unset) afterwards
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR")
    monkeypatch.setattr(inductor_config, "fx_graph_cache", False)
    monkeypatch.setattr(aot_config, "enable_autograd_cache", False)


def test_the_cache_lives_under_repro_s_cache_dir(no_inductor_dir, monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("REPRO_CACHE_DIR", str(tmp_path))
    assert use_compile_cache() == tmp_path / "inductor" == compile_cache_dir()
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "inductor")   # where inductor reads it
    assert inductor_config.fx_graph_cache and aot_config.enable_autograd_cache


def test_the_default_is_in_the_home_not_in_tmp(no_inductor_dir, monkeypatch) -> None:
    monkeypatch.delenv("REPRO_CACHE_DIR", raising=False)
    assert compile_cache_dir() == Path.home() / ".cache" / "repro" / "inductor"


def test_the_user_s_inductor_dir_wins(no_inductor_dir, monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("REPRO_CACHE_DIR", str(tmp_path / "repro"))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "mine"))
    assert use_compile_cache() == tmp_path / "mine"
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "mine")


def test_inductor_s_own_default_is_not_taken_for_the_user_s(no_inductor_dir, monkeypatch, tmp_path: Path) -> None:
    """Inductor writes its default (under /tmp) into the environment at its first compilation; a job
    compiled after a benchmark in the same process (repro selftest on the H200) then kept its graphs there."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    monkeypatch.setenv("REPRO_CACHE_DIR", str(tmp_path))
    cache_dir()   # what inductor does when it first compiles with nothing set
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] != str(tmp_path / "inductor")
    assert use_compile_cache() == tmp_path / "inductor"
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "inductor")
