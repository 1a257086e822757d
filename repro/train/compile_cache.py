"""Where ``torch.compile`` keeps what it compiled, so that the next job on the machine reuses it.

Compiling the objective (:mod:`repro.train.compiled`) is most of a short job's start-up on a GPU:
dynamo traces the model, AOTAutograd derives the backward pass, inductor generates and Triton
compiles the kernels. torch caches the last three on disk, keyed by the graph, the torch version
and the device: inductor's FX graph cache (the generated code of forward and backward), the
AOTAutograd cache (the joint graph's split into forward and backward, on top of it) and Triton's
kernel binaries. A job whose graph is unchanged then skips inductor's and Triton's work and only
traces (dynamo still runs). torch keeps them under the temporary directory by default
(``/tmp/torchinductor_<user>``), which a cluster node often empties between jobs; a job here keeps
them under ``$REPRO_CACHE_DIR/inductor`` (default ``~/.cache/repro/inductor``). A
``TORCHINDUCTOR_CACHE_DIR`` set by the user wins, unless it is torch's own default: inductor writes
that into the environment at its first compilation, so a job compiled after a benchmark in the same
process (the H200's selftest) would otherwise have taken it for the user's choice.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["compile_cache_dir", "use_compile_cache"]


def compile_cache_dir() -> Path:
    """The directory compiled graphs and kernels are kept in (see the module's docstring)."""
    explicit = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if explicit and os.path.abspath(explicit) == _inductor_default():
        explicit = None   # what inductor writes at its first compilation: no choice of the user's
    if explicit:
        return Path(explicit)
    root = os.environ.get("REPRO_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "repro")
    return Path(root) / "inductor"


def _inductor_default() -> str | None:
    try:
        from torch._inductor.runtime.cache_dir_utils import default_cache_dir
    except ImportError:   # another torch: its default is not recognised, and the variable is taken as set
        return None
    return os.path.abspath(default_cache_dir())


def use_compile_cache() -> Path:
    """Point inductor's caches at :func:`compile_cache_dir` and turn them on (torch's defaults, made
    explicit so that a site-wide setting does not silently turn them off); before the first compilation."""
    import torch._functorch.config as aot_config
    import torch._inductor.config as inductor_config

    path = compile_cache_dir()
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(path)   # read by inductor at each compilation
    inductor_config.fx_graph_cache = True
    aot_config.enable_autograd_cache = True
    return path
