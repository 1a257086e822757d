"""The CUDA caching allocator for a run whose every pass has a new shape (Section 5.1's batches).

Batches of ~25000 + 25000 tokens by approximate length have a new (sentences x length) shape nearly
every update, so the allocator is asked for ever slightly different sizes. With fixed-size
segments it keeps allocating new ones from the driver (``cudaMalloc``, which waits for the device)
and fragments them; expandable segments grow one mapping instead. PyTorch's documentation names
this case ("a job changing allocation sizes frequently, such as having a changing batch size"),
and torchtitan's launcher turns it on for every training run. ``repro bench jobpath`` counts the
driver allocations made while it measures (``device_allocations_while_measured``), so a GPU run
shows what this setting leaves.
"""

from __future__ import annotations

import os

import torch

SETTING = "expandable_segments:True"
#: the environment variables through which a user configures the allocator (both names are read by torch)
USER_VARIABLES = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")


def grow_segments_for_varying_shapes() -> str:
    """Turn on expandable segments on a real CUDA device, unless the user configured the allocator's
    segments; returns what was done, for the run's record."""
    if torch.version.cuda is None or not torch.cuda.is_available():   # the CPU, the tests' fake accelerator
        return "not CUDA: left as it is"
    for name in USER_VARIABLES:
        if "expandable_segments" in os.environ.get(name, ""):
            return f"as the user set it ({name}={os.environ[name]})"
    torch.cuda.memory._set_allocator_settings(SETTING)
    return SETTING
