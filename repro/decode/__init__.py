"""Section 6.1: decoding. Beam search (beam 4, length penalty alpha = 0.6, maximum output
length input + 50, early termination) and greedy decoding, both incremental over the
model's key/value cache, with a full-recompute mode that must give the same output."""

from repro.decode.beam import beam_search, length_penalty
from repro.decode.greedy import greedy_decode
from repro.decode.settings import PARSING, TRANSLATION, DecodeSettings

__all__ = ["PARSING", "TRANSLATION", "DecodeSettings", "beam_search", "greedy_decode", "length_penalty"]
