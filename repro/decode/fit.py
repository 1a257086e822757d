"""Whether a vocabulary and a search fit the model they are used with, checked before decoding.

A vocabulary of another run (280 entries beside a model of 300) decodes without an error into
words of the wrong ids; it is refused naming both files and both sizes. An output limit of
input + ``max_len_offset`` tokens (Section 6.1) that the model's positional table
(``max_positions``) cannot reach would fail part-way through decoding; it is refused naming
the input line and the sizes.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from repro.data.vocab import SharedVocab
from repro.decode.settings import DecodeSettings
from repro.errors import CheckpointError, UsageError
from repro.model import TransformerConfig


def check_vocab(vocab: SharedVocab, config: TransformerConfig, vocab_source: str | os.PathLike[str],
                checkpoint: str | os.PathLike[str]) -> None:
    """Refuse ``vocab`` unless it has exactly as many entries as the model's embeddings."""
    sizes = {config.src_vocab_size, config.tgt_vocab_size}
    if sizes != {len(vocab)}:
        model = " / ".join(str(s) for s in sorted(sizes))
        raise CheckpointError(f"{vocab_source}: the vocabulary has {len(vocab)} entries, but the model of {checkpoint} "
                              f"has {model}; give the vocab.json of the run that trained it (--vocab)")


def check_output_lengths(config: TransformerConfig, vocab: SharedVocab, lines: Sequence[str],
                         settings: DecodeSettings, source: str) -> None:
    """Refuse a search whose longest output (input + offset tokens, then EOS) needs more target
    positions than the model has, naming the first input line that does."""
    positions = config.max_positions
    if settings.max_len_offset + 1 > positions:
        raise UsageError(f"--max-len-offset {settings.max_len_offset}: the model has {positions} positions, so an "
                         f"output can be at most {positions - 1} tokens long (input + offset, then EOS)")
    for number, ids in enumerate(vocab.encode_batch(list(lines)), start=1):
        if ids and len(ids) + settings.max_len_offset + 1 > positions:
            raise UsageError(f"{source}:{number}: {len(ids)} input tokens + --max-len-offset "
                             f"{settings.max_len_offset} exceed the model's {positions} positions; "
                             f"use a --max-len-offset of at most {max(positions - 1 - len(ids), 0)} or split the line")
