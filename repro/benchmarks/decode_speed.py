"""Decoding speed: incremental decoding over the key/value cache against full recompute.

A base-configuration model (37000-word tied projection, untrained) whose EOS logit is held
down, so that every output runs to exactly ``--out-len`` tokens (default 64): beam search
(beam 4, alpha 0.6) and greedy decoding, each with the cache and by recomputing the whole
prefix every step, on the same sources. Also checks that both modes give the same output.

    python -m repro.benchmarks.decode_speed [--sentences 8] [--out-len 64] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from repro.decode import beam_search, greedy_decode
from repro.decode.step import EOS
from repro.model import Transformer, get_preset


class NoEos(Transformer):
    """Never ends on its own: outputs run to the length limit (source length + offset)."""

    def project(self, hidden: torch.Tensor) -> torch.Tensor:
        logits = super().project(hidden)
        logits[..., EOS] = -1e9
        return logits


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=8, help="beam search batch (x beam 4 rows)")
    parser.add_argument("--greedy-sentences", type=int, default=32)
    parser.add_argument("--src-len", type=int, default=14)
    parser.add_argument("--out-len", type=int, default=64)
    parser.add_argument("--vocab", type=int, default=37000)
    parser.add_argument("--layers", type=int, default=None)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--skip-recompute-beam", action="store_true")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cfg = get_preset("base").model.replace(src_vocab_size=args.vocab, tgt_vocab_size=args.vocab, dropout=0.0,
                                           **({"n_layers": args.layers} if args.layers else {}))
    model = NoEos(cfg).eval()
    offset = args.out_len - args.src_len
    g = torch.Generator().manual_seed(1)
    out: dict = {"benchmark": "decode_speed", "threads": torch.get_num_threads(), "vocab": args.vocab,
                 "layers": cfg.n_layers, "out_len": args.out_len, "src_len": args.src_len, "runs": {}}

    def timed(name: str, fn, n_sentences: int) -> list:
        start = time.perf_counter()
        hyps = fn()
        seconds = time.perf_counter() - start
        produced = sum(len(h) for h in hyps)
        out["runs"][name] = {"seconds": round(seconds, 3), "sentences": n_sentences,
                             "output_tokens": produced, "tokens_per_s": round(produced / seconds, 1)}
        return hyps

    src = torch.randint(4, args.vocab, (args.sentences, args.src_len), generator=g)
    cached = timed("beam4_cached", lambda: beam_search(model, src, max_len_offset=offset), args.sentences)
    if not args.skip_recompute_beam:
        full = timed("beam4_recompute", lambda: beam_search(model, src, max_len_offset=offset, use_cache=False),
                     args.sentences)
        out["beam_same_output"] = cached == full
        out["beam_speedup"] = round(out["runs"]["beam4_recompute"]["seconds"] / out["runs"]["beam4_cached"]["seconds"], 2)
    src_g = torch.randint(4, args.vocab, (args.greedy_sentences, args.src_len), generator=g)
    gc = timed("greedy_cached", lambda: greedy_decode(model, src_g, max_len_offset=offset), args.greedy_sentences)
    gf = timed("greedy_recompute", lambda: greedy_decode(model, src_g, max_len_offset=offset, use_cache=False),
               args.greedy_sentences)
    out["greedy_same_output"] = gc == gf
    out["greedy_speedup"] = round(out["runs"]["greedy_recompute"]["seconds"] / out["runs"]["greedy_cached"]["seconds"], 2)
    out["target_beam_speedup"] = 5.0
    print(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
