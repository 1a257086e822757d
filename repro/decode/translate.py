"""Translating a list of sentences with a trained checkpoint: batching, search, detokenising.

Sentences are sorted by length and decoded in batches of about ``max_tokens`` source tokens
(times the beam), then put back in their input order. An empty input line gives an empty
output line, so that outputs stay line-aligned with inputs.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from repro.data.vocab import SharedVocab
from repro.decode.beam import beam_search
from repro.decode.fit import check_vocab
from repro.decode.greedy import greedy_decode
from repro.decode.settings import GPU_DECODE_FACTOR, TRANSLATION, DecodeSettings
from repro.errors import CheckpointError
from repro.files.reader import present
from repro.machine_memory import too_large
from repro.model import Transformer, TransformerConfig
from repro.model.precision import Precision
from repro.runtime import Runtime, runtime_for
from repro.train.checkpoint import load_checkpoint
from repro.train.lineage import check_vocab_file, require_lineage

#: Bytes per weight of a model loaded to decode: its fp32 weights, and the state they are loaded from.
WEIGHT_BYTES = 8


def load_model(path: str | os.PathLike[str], device: torch.device | str = "cpu", *,
               runtime: Runtime | None = None, allow_no_lineage: bool = False) -> tuple[Transformer, dict[str, Any]]:
    """The model of a checkpoint (training or averaged), in eval mode, on ``runtime``'s device (or
    ``device``); a checkpoint without a readable lineage is refused unless ``allow_no_lineage``
    (:func:`repro.train.lineage.require_lineage`)."""
    if runtime is not None:
        device = runtime.device
    state = load_checkpoint(path)
    require_lineage(state, path, allow=allow_no_lineage, doing="decoding with it")
    return model_of(state, path).to(device).eval(), state


def model_of(state: dict[str, Any], path: str | os.PathLike[str]) -> Transformer:
    """The model a loaded checkpoint ``state`` (read from ``path``) holds, built on the CPU: refused
    naming the file, before it is built, when its configuration is one the paper's model cannot take
    or too large for this machine, and when its weights do not fit that configuration."""
    try:
        cfg = TransformerConfig.from_dict(state["model_config"])
        why = too_large(WEIGHT_BYTES * cfg.parameter_estimate(), f"{path}: its model of about "
                        f"{cfg.parameter_estimate():.3g} weights")
        if why is not None:   # refused before it is built (on the CPU): the configuration says how large
            raise CheckpointError(why)
        model = Transformer(cfg)
        model.load_state_dict(state["model"])
    except (RuntimeError, TypeError, ValueError) as err:
        lines = [line.strip() for line in str(err).splitlines() if line.strip()] or [type(err).__name__]
        first = lines[1] if len(lines) > 1 and lines[0].endswith(":") else lines[0]   # torch's heading, then the first fault
        raise CheckpointError(f"{path}: weights do not fit its model configuration ({first[:200]})") from None
    return model


def decode_settings_of(state: dict[str, Any]) -> DecodeSettings | None:
    """The decoding settings of the recipe a checkpoint was trained with (None for checkpoints
    written before checkpoints carried their recipe)."""
    decode = (state.get("recipe") or {}).get("decode")
    return DecodeSettings.from_dict(decode, source="the checkpoint's recipe") if decode else None


def vocab_path(checkpoint: str | os.PathLike[str], vocab: str | os.PathLike[str] | None = None) -> Path | None:
    """The vocabulary :func:`find_vocab` reads: ``vocab`` if given, else ``vocab.json`` beside the
    checkpoint or in its run directory (None: neither)."""
    if vocab is not None:
        return Path(vocab)
    path = Path(checkpoint).resolve()
    return next((f / "vocab.json" for f in (path.parent, path.parent.parent)
                 if present(f / "vocab.json", "vocabulary", error=CheckpointError)), None)


def find_vocab(checkpoint: str | os.PathLike[str], vocab: str | os.PathLike[str] | None = None,
               model: Transformer | None = None, state: dict[str, Any] | None = None) -> SharedVocab:
    """``vocab`` if given, else ``vocab.json`` of the run the checkpoint belongs to; with ``model``
    (the checkpoint's), one of another size is refused naming both (:mod:`repro.decode.fit`); with
    ``state`` (the loaded checkpoint), one other than the run's own (:mod:`repro.train.lineage`) too."""
    found = vocab_path(checkpoint, vocab)
    if found is None:
        raise CheckpointError(f"{checkpoint}: no vocab.json beside it or in its run directory; pass --vocab")
    loaded = SharedVocab.load(found)
    if model is not None:
        check_vocab(loaded, model.cfg, found, checkpoint)
    if state is not None:
        check_vocab_file(state, checkpoint, found)
    return loaded


def search_of(settings: DecodeSettings, greedy: bool = False) -> dict[str, Any]:
    """The search a decode with ``settings`` (or greedily) runs, as :func:`translate_ids` calls it
    (Section 6.1): the search, its beam, the length penalty's alpha (None: a greedy search applies
    none), the output limit (input length + ``max_len_offset``) and the stopping rule
    (:data:`repro.decode.beam.STOP_RULES`). What an evaluation records of the decode that ran."""
    if greedy:
        return {"search": "greedy", "beam_size": 1, "alpha": None, "max_len_offset": settings.max_len_offset,
                "stop": "early"}
    return {"search": "beam", "beam_size": settings.beam_size, "alpha": settings.alpha,
            "max_len_offset": settings.max_len_offset, "stop": "early"}


def translate_ids(
    model: Transformer, sources: Sequence[list[int]], settings: DecodeSettings = TRANSLATION, *,
    max_tokens: int | None = None, greedy: bool = False, use_cache: bool = True,
    device: torch.device | str | None = None, progress: bool | None = None, precision: Precision | None = None,
    runtime: Runtime | None = None,
) -> list[list[int]]:
    """Output ids for each source (ids without BOS/EOS), searched with ``settings`` (or greedily) on
    ``runtime`` (default: where the model is, in ``precision``): its device, and its autocast (bf16
    matrix products; the beam's scores stay fp32)."""
    runtime = runtime_for(model, runtime, device=device, precision=precision)
    if max_tokens is None:
        max_tokens = settings.max_tokens * (GPU_DECODE_FACTOR if runtime.on_gpu else 1)
    order = sorted((i for i, s in enumerate(sources) if s), key=lambda i: len(sources[i]))
    out: list[list[int]] = [[] for _ in sources]
    search = search_of(settings, greedy)
    width = search["beam_size"]
    batches, current, longest = [], [], 0
    for i in order:
        longest = max(longest, len(sources[i]))
        if current and (len(current) + 1) * longest * width > max_tokens:
            batches.append(current)
            current, longest = [], len(sources[i])
        current.append(i)
    if current:
        batches.append(current)
    show = sys.stderr.isatty() if progress is None else progress
    for batch in tqdm(batches, desc="decode", unit="batch", disable=not show):
        src = torch.zeros(len(batch), max(len(sources[i]) for i in batch), dtype=torch.long)
        for row, i in enumerate(batch):
            src[row, : len(sources[i])] = torch.tensor(sources[i])
        src = runtime.put(src)
        with runtime.autocast():
            if greedy:
                hyps = greedy_decode(model, src, max_len_offset=search["max_len_offset"], use_cache=use_cache)
            else:
                hyps = beam_search(model, src, beam_size=search["beam_size"], alpha=search["alpha"],
                                   max_len_offset=search["max_len_offset"], stop=search["stop"], use_cache=use_cache)
        for i, hyp in zip(batch, hyps):
            out[i] = hyp
    return out


def translate(model: Transformer, vocab: SharedVocab, sentences: Sequence[str],
              settings: DecodeSettings = TRANSLATION, **kwargs: Any) -> list[str]:
    """Detokenised translations of raw ``sentences`` (Section 6.1 search settings by default)."""
    sources = vocab.encode_batch([s.strip() for s in sentences])
    return [vocab.decode(ids) for ids in translate_ids(model, sources, settings, **kwargs)]
