"""``repro data list``, ``repro data show NAME``, ``repro data fetch NAME``: the datasets of Section 5.1;
``repro data prepare-parsing OUT_DIR ...``: Section 6.3's parsing folders (``python -m repro.parsing.prepare``)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from repro.argtypes import output_dir, positive_int
from repro.data.corpus import read_parallel
from repro.data.fetch import fetch
from repro.data.downloads import RECIPES
from repro.data.corpora import get_dataset, registered_names, resolve_data_dir
from repro.parsing.prepare import main as prepare_main
from repro.paths import existing_dir


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("data", help="list, inspect or download datasets")
    parser.add_argument("--data-dir", default=None,
                        help="data directory (default: $REPRO_DATA_DIR, else ../shared/data beside the repository)")
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    ls = actions.add_parser("list", help="registered datasets and which splits are present")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=list_datasets)
    show = actions.add_parser("show", help="read every split of one dataset and count its pairs (validates it)")
    show.add_argument("name")
    show.add_argument("--max-len", type=positive_int, default=None, help="also count pairs longer than this (words)")
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=show_dataset)
    get = actions.add_parser("fetch", help="download a dataset from its official sources (needs a network)")
    get.add_argument("name", choices=sorted(RECIPES))
    get.add_argument("--cache-dir", default=None, type=output_dir,
                     help="where archives are kept (default: DATA_DIR/.downloads)")
    get.set_defaults(func=fetch_dataset)
    prep = actions.add_parser("prepare-parsing", help="Section 6.3's parsing data: source words, linearised trees, "
                                                      "gold trees (python -m repro.parsing.prepare)")
    prep.add_argument("out_dir", metavar="OUT_DIR", help="the folder to write")
    prep.add_argument("args", nargs=argparse.REMAINDER, metavar="...",
                      help="repro.parsing.prepare's own flags: --wsj DIR, --semi SRC TGT --wsj-prepared DIR, "
                           "--targets {symbols,per-word} (python -m repro.parsing.prepare --help)")
    prep.set_defaults(func=prepare_parsing)


def _data_dir(args: argparse.Namespace) -> Path:
    """The data directory to read, which must exist (a typo is not "every split missing")."""
    return existing_dir(resolve_data_dir(args.data_dir), "data directory (--data-dir or $REPRO_DATA_DIR)")


def list_datasets(args: argparse.Namespace) -> int:
    root = _data_dir(args)
    rows = []
    for name in registered_names():
        ds = get_dataset(name, root)
        rows.append({"name": name, "src_lang": ds.src_lang, "tgt_lang": ds.tgt_lang, "tokenized": ds.tokenized,
                     "splits": sorted(ds.splits), "present": ds.available_splits(), "fetchable": ds.fetchable,
                     "description": ds.description})
    if args.json:
        print(json.dumps({"data_dir": str(root), "datasets": rows}, indent=2))
        return 0
    print(f"data directory: {root}")
    for r in rows:
        missing = [s for s in r["splits"] if s not in r["present"]]
        note = f"  missing: {', '.join(missing)}" + (" (repro data fetch)" if r["fetchable"] else "") if missing else ""
        print(f"{r['name']:26s} {r['src_lang']}-{r['tgt_lang']}  present: {', '.join(r['present']) or '-'}{note}")
    return 0


def show_dataset(args: argparse.Namespace) -> int:
    ds = get_dataset(args.name, _data_dir(args))
    info = {"name": ds.name, "description": ds.description, "tokenized": ds.tokenized, "splits": {}}
    present = ds.available_splits()
    info["missing"] = [s for s in ds.splits if s not in present]
    for split in present:
        src, tgt = ds.split(split)
        corpus = read_parallel(src, tgt, max_len=args.max_len)
        info["splits"][split] = {"src": str(src), "tgt": str(tgt), "pairs": len(corpus), "over_long": corpus.filtered}
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print(f"{ds.name}: {ds.description}")
    for split, s in info["splits"].items():
        extra = f" ({s['over_long']} longer than {args.max_len} words)" if args.max_len else ""
        print(f"  {split:18s} {s['pairs']:8d} pairs{extra}  {s['src']}")
    for split in info["missing"]:
        print(f"  {split:18s}  not present" + (f" (repro data fetch {ds.name})" if ds.fetchable else ""))
    return 0


def fetch_dataset(args: argparse.Namespace) -> int:
    root = resolve_data_dir(args.data_dir)
    fetch(args.name, root, cache_dir=None if args.cache_dir is None else resolve_data_dir(args.cache_dir))
    return 0


def prepare_parsing(args: argparse.Namespace) -> int:
    return int(prepare_main([args.out_dir, *args.args, *(["--data-dir", args.data_dir] if args.data_dir else [])])
               or 0)
