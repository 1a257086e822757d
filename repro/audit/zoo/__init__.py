"""The audit zoo: adapters for the Transformer implementations people use, in one registry.

Each entry is an adapter factory (``module:factory``) and the Python package it needs; the
implementations other than PyTorch's come with the optional extra ``pip install -e .[zoo]``
(transformers, x-transformers). Every adapter builds its models from a config with random
weights: nothing is downloaded. ``repro audit --zoo`` runs every installed entry against every
auditable claim (:mod:`repro.audit.side_by_side`).

Implementations tried and left out, with pip's reason (resolved beside the pinned
torch==2.13.0 on Python 3.11; :data:`NOT_INSTALLABLE`), are listed in the zoo's report too.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass


@dataclass(frozen=True)
class ZooEntry:
    """One column of the zoo: ``key`` names it, ``target`` is the adapter factory, ``package``
    the import name that must be installed, ``distribution`` the pip name whose version is shown."""

    key: str
    target: str
    package: str
    distribution: str
    note: str = ""

    @property
    def installed(self) -> bool:
        return importlib.util.find_spec(self.package) is not None


ZOO: tuple[ZooEntry, ...] = (
    ZooEntry("repro", "repro.audit.repro_adapter:adapter", "repro", "torch", "the reference: this project's model"),
    ZooEntry("torch", "repro.audit.torch_adapter:adapter", "torch", "torch", "torch.nn.Transformer, post-norm (its default)"),
    ZooEntry("marian", "repro.audit.zoo.marian:adapter", "transformers", "transformers",
             "MarianMTModel set up like the base model (ReLU, scaled embeddings)"),
    ZooEntry("marian-defaults", "repro.audit.zoo.marian:adapter_defaults", "transformers", "transformers",
             "MarianMTModel with MarianConfig's GELU and unscaled embeddings"),
    ZooEntry("fsmt", "repro.audit.zoo.fsmt:adapter", "transformers", "transformers",
             "FSMT (fairseq's WMT19 model), called as model(input_ids, decoder_input_ids=...)"),
    ZooEntry("fsmt-no-cache", "repro.audit.zoo.fsmt:adapter_no_cache", "transformers", "transformers",
             "FSMT called with use_cache=False, the call that builds its causal mask"),
    ZooEntry("x-transformers", "repro.audit.zoo.xtransformers:adapter", "x_transformers", "x-transformers",
             "XTransformer with post-norm, ReLU, sinusoids and tied token embeddings"),
    ZooEntry("bart", "repro.audit.zoo.bart:adapter", "transformers", "transformers",
             "BartForConditionalGeneration with BartConfig's defaults (GELU, learned positions, embedding LayerNorm)"),
    ZooEntry("t5", "repro.audit.zoo.t5:adapter", "transformers", "transformers",
             "T5ForConditionalGeneration with T5Config's defaults (pre-norm, relative position bias, no biases)"),
)

#: Maintained implementations that do not install beside torch==2.13.0 (pip's resolution, this
#: project's Python 3.11), or that would replace packages repro needs.
NOT_INSTALLABLE: dict[str, str] = {
    "OpenNMT-py": (
        "3.5.1 (the last release) depends on torch<2.3,>=2.1; pip falls back to OpenNMT-py 3.0.4 (2023), which "
        "installs beside torch 2.13.0 (with ctranslate2 3.24, pyonmttok, tensorboard, protobuf 7) and imports; the "
        "project continues as eole. No adapter for the 3.0.4 fallback yet."
    ),
    "JoeyNMT": (
        "2.3.0 resolves and installs beside torch 2.13.0 (pinning protobuf<3.21 and pulling pylint, flake8, yapf, "
        "datasets, pyarrow, tensorboard), but 'import joeynmt' fails: joeynmt.helpers imports importlib_metadata, "
        "which it does not declare. Not in the zoo."
    ),
    "Sockeye": (
        "3.1.34 (the last, PyTorch-based) depends on torch<1.14.0,>=1.10.0; pip falls back to sockeye 2.3.24, "
        "which is MXNet-based (mxnet 1.8.0) and pins sacrebleu==1.4.14 and numpy 1.26 (repro needs sacrebleu>=2.4). "
        "Not installable beside torch 2.13.0."
    ),
    "fairseq": (
        "0.12.2 (the last release, 2022) ships as a source distribution; pip resolves it beside torch 2.13.0 "
        "(with torchaudio 2.11.0, hydra-core 1.0.7, omegaconf 2.0.6, and antlr4-python3-runtime 4.8 replacing "
        "4.13.2) and builds, but 'import fairseq' fails on Python 3.11: 'mutable default CommonConfig for field "
        "common is not allowed' (dataclass rules since 3.11); the release is unmaintained. Its WMT19 model is in the zoo through FSMT, the transformers port."
    ),
    "fairseq2": (
        "0.8.1 depends on fairseq2n==0.8.1, which depends on torch==2.9.1; no fairseq2n on PyPI is built for "
        "torch 2.13 (each release pins one torch). Not installable beside torch 2.13.0."
    ),
}


def installed_entries(keys: list[str] | None = None) -> list[ZooEntry]:
    """The entries whose package is installed, in registry order (only ``keys`` if given)."""
    return [e for e in ZOO if e.installed and (not keys or e.key in keys)]


def missing_entries() -> list[ZooEntry]:
    """Registered entries whose package is not installed (``pip install -e .[zoo]``)."""
    return [e for e in ZOO if not e.installed]
