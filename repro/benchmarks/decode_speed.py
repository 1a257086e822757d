"""Decoding speed: incremental decoding over the key/value cache against full recompute.

A base-configuration model (37000-word tied projection, untrained) whose EOS logit is held
down, so that every output runs to exactly ``--out-len`` tokens (default 64): beam search
(beam 4, alpha 0.6) and greedy decoding, each with the cache and by recomputing the whole
prefix every step, on the same sources. Also checks that both modes give the same output.
The four cases run in turn, ``--rounds`` times (so all see the same machine load); the report
gives each case's median time and the median and spread of the per-round speed-ups.

    python -m repro.benchmarks.decode_speed [--sentences 8] [--out-len 64] [--threads 2]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch

from repro.argtypes import OneLineParser, non_negative_int, positive_int
from repro.benchmarks.machine import (
    alternate,
    environment,
    parse_benchmark_args,
    publish,
    ratio_spread,
    spread,
)
from repro.decode import beam_search, greedy_decode
from repro.decode.stepper import EOS
from repro.model import Transformer, get_preset
from repro.model.precision import Precision


class NoEos(Transformer):
    """Never ends on its own: outputs run to the length limit (source length + offset)."""

    def project(self, hidden: torch.Tensor) -> torch.Tensor:
        logits = super().project(hidden)
        logits[..., EOS] = -1e9
        return logits


def main(argv: list[str] | None = None) -> dict:
    parser = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=positive_int, default=8, help="beam search batch (x beam 4 rows)")
    parser.add_argument("--greedy-sentences", type=positive_int, default=32)
    parser.add_argument("--src-len", type=positive_int, default=14)
    parser.add_argument("--out-len", type=positive_int, default=64)
    parser.add_argument("--vocab", type=positive_int, default=37000)
    parser.add_argument("--layers", type=positive_int, default=None)
    parser.add_argument("--skip-recompute-beam", action="store_true")
    parser.add_argument("--rounds", type=positive_int, default=3, help="measured rounds; each runs every case once, in turn")
    parser.add_argument("--warmup", type=non_negative_int, default=0, help="unmeasured rounds first")
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    args = parse_benchmark_args(parser, argv)
    torch.manual_seed(0)
    cfg = get_preset("base").model.replace(src_vocab_size=args.vocab, tgt_vocab_size=args.vocab, dropout=0.0,
                                           **({"n_layers": args.layers} if args.layers else {}))
    model = NoEos(cfg).eval()
    offset = args.out_len - args.src_len
    g = torch.Generator().manual_seed(1)
    src = torch.randint(4, args.vocab, (args.sentences, args.src_len), generator=g)
    src_g = torch.randint(4, args.vocab, (args.greedy_sentences, args.src_len), generator=g)
    precision = Precision(args.precision, "asked for (--precision)")
    outputs: dict[str, list] = {}

    def case(name: str, fn) -> tuple[str, Callable[[], None]]:
        def run() -> None:
            with precision.autocast():
                outputs[name] = fn()
        return name, run

    cases = [case("beam4_cached", lambda: beam_search(model, src, max_len_offset=offset))]
    if not args.skip_recompute_beam:
        cases.append(case("beam4_recompute", lambda: beam_search(model, src, max_len_offset=offset, use_cache=False)))
    cases += [case("greedy_cached", lambda: greedy_decode(model, src_g, max_len_offset=offset)),
              case("greedy_recompute", lambda: greedy_decode(model, src_g, max_len_offset=offset, use_cache=False))]
    seconds = alternate(dict(cases), args.rounds, warmup=args.warmup)
    sentences = {"beam4_cached": args.sentences, "beam4_recompute": args.sentences,
                 "greedy_cached": args.greedy_sentences, "greedy_recompute": args.greedy_sentences}
    out: dict = {"benchmark": "decode_speed", **environment(args.note), "precision": args.precision,
                 "vocab": args.vocab, "layers": cfg.n_layers, "out_len": args.out_len, "src_len": args.src_len,
                 "rounds": args.rounds, "order": "alternating: " + ", ".join(seconds), "runs": {}}
    for name, values in seconds.items():
        produced = sum(len(h) for h in outputs[name])
        median = spread(values)["median"]
        out["runs"][name] = {"seconds": median, "seconds_spread": spread(values), "sentences": sentences[name], "output_tokens": produced,
                             "tokens_per_s": round(produced / median, 1)}
    if not args.skip_recompute_beam:
        out["beam_same_output"] = outputs["beam4_cached"] == outputs["beam4_recompute"]
        out["beam_speedup_spread"] = ratio_spread(seconds["beam4_recompute"], seconds["beam4_cached"], 2)
        out["beam_speedup"] = out["beam_speedup_spread"]["median"]
    out["greedy_same_output"] = outputs["greedy_cached"] == outputs["greedy_recompute"]
    out["greedy_speedup_spread"] = ratio_spread(seconds["greedy_recompute"], seconds["greedy_cached"], 2)
    out["greedy_speedup"] = out["greedy_speedup_spread"]["median"]
    out["target_beam_speedup"] = 5.0
    return publish(out, args.out)


if __name__ == "__main__":
    main()
