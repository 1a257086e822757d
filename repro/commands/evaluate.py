"""``repro evaluate``: BLEU (sacreBLEU, and the paper's tokenized protocol) and per-wordpiece
perplexity of a checkpoint on a dataset's splits, recorded in the checkpoint's run folder
(``RUN/evaluations/evaluate.<split>.<measure>.json``, :mod:`repro.measures.evaluated_run`) for
``repro check --run``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from repro import paths
from repro.argtypes import existing_dir, existing_file, not_blank, output_file
from repro.cli_flags import add_lineage_argument, runtime_for_loaded, runtime_from_args
from repro.commands.translate import add_search_arguments, check_search_flags, search_settings
from repro.data.corpora import get_dataset, resolve_data_dir
from repro.decode.translate import find_vocab, load_model, vocab_path
from repro.eval.bleu import dataset_language
from repro.eval.translation import evaluate_bleu, evaluate_perplexity
from repro.measures.evaluated_run import hypotheses_file, keep_evaluation, run_folder
from repro.measures.measure_registry import Trained
from repro.train.average import averaged_identities
from repro.train.lineage import ALLOW_FLAG, readable_lineage


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("evaluate", help="BLEU on a test split and perplexity on a dev split of a checkpoint")
    parser.add_argument("--checkpoint", required=True, type=existing_file)
    parser.add_argument("--vocab", type=existing_file, help="vocab.json (default: the one in the checkpoint's run directory)")
    parser.add_argument("--dataset", default=None, type=not_blank,
                        help="dataset name (default: the one the checkpoint was trained on)")
    parser.add_argument("--data-dir", type=existing_dir, help="data directory (default: $REPRO_DATA_DIR or ../shared/data)")
    parser.add_argument("--split", default="test", help="split to translate and score (default test)")
    parser.add_argument("--ppl-split", default="dev", help="split for perplexity (default dev; 'none' to skip)")
    parser.add_argument("--hypotheses", type=output_file, help="also write the translations to this file (default: "
                        "RUN/hypotheses.evaluate.SPLIT.LANG when the checkpoint is of a run folder)")
    parser.add_argument("--no-record", action="store_true",
                        help="record nothing in the checkpoint's run folder (default: RUN/evaluations/evaluate.*.json)")
    add_search_arguments(parser)
    add_lineage_argument(parser, "evaluate")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    check_search_flags(args)
    runtime = runtime_from_args(args, "evaluate", resolve_precision=False)
    model, state = load_model(args.checkpoint, runtime=runtime, allow_no_lineage=args.allow_no_lineage)
    runtime = runtime_for_loaded(runtime, model, args, "evaluate")
    settings = search_settings(args, state, "evaluate")
    vocab = find_vocab(args.checkpoint, args.vocab, model, state)
    train_cfg = state.get("train_config") or {}
    name = args.dataset or train_cfg.get("dataset") or "wmt14-en-de"
    data_dir = args.data_dir or train_cfg.get("data_dir")
    dataset = get_dataset(name, resolve_data_dir(data_dir))
    dataset_language(dataset)   # refused before the perplexity and the decode
    scored = [p for split in (args.split, args.ppl_split) if split in dataset.splits for p in dataset.splits[split]]
    paths.not_an_input(args.hypotheses, [args.checkpoint, vocab_path(args.checkpoint, args.vocab), *scored],
                       "hypotheses file (--hypotheses)")
    run_dir = None if args.no_record else run_folder(args.checkpoint)
    hypotheses = Path(args.hypotheses) if args.hypotheses else None
    if run_dir is not None and hypotheses is None:   # the record's translations, for a check to rescore them
        hypotheses = hypotheses_file(run_dir, args.split, dataset.tgt_lang)
        paths.not_an_input(hypotheses, [args.checkpoint, *scored], "hypotheses file")
    report = {"checkpoint": str(args.checkpoint), "dataset": name, **runtime.provenance()}
    if readable_lineage(state) is None:   # used only with --allow-no-lineage: the report says so
        report["lineage"] = f"unchecked: the checkpoint has no readable lineage ({ALLOW_FLAG})"
    ppl = None
    if args.ppl_split != "none":
        ppl = evaluate_perplexity(model, vocab, dataset, args.ppl_split, runtime=runtime)
        report["perplexity"] = {"split": args.ppl_split, "ppl": ppl.ppl, "tokens": ppl.tokens,
                                "token_accuracy": ppl.accuracy}
    bleu = evaluate_bleu(model, vocab, dataset, args.split, settings, greedy=args.greedy, output=hypotheses,
                         runtime=runtime)
    report["bleu"] = {"split": args.split, "sacrebleu": bleu.sacrebleu.to_dict(), "paper": bleu.paper.to_dict(),
                      "decode_seconds": round(bleu.seconds, 1), **bleu.settings}
    if run_dir is not None:
        checkpoint = Path(args.checkpoint)
        averaged_from = tuple(state.get("averaged_from") or (checkpoint.name,))   # a training checkpoint: itself
        trained = Trained(model, vocab, dataset, runtime, settings, run_dir, checkpoints_averaged=len(averaged_from),
                          files={"hypotheses": hypotheses}, checkpoint=checkpoint, averaged_from=averaged_from,
                          averaged=averaged_identities(state, checkpoint))
        kept = keep_evaluation(trained, state, bleu, (args.ppl_split, ppl) if ppl is not None else None)
        report["records"] = [str(p) for p in kept]
    elif not args.no_record:
        print(f"repro evaluate: {args.checkpoint} lies in no run folder (no checkpoints/ or run.json beside it): "
              "no evaluation record written", file=sys.stderr)
    print(json.dumps(report, indent=2))
    return 0
