"""Section 5.1's token counts on the data path a run really takes: the corpus the training data path
encodes once (:class:`~repro.data.encoded.EncodedPairs`, memory-mapped by every rank) and the
batcher the loop builds over it, against counts made here from the text, line by line."""

from __future__ import annotations

import tempfile
from itertools import islice
from pathlib import Path

from repro.checks.jobs import job_config, own
from repro.checks.recipe_runs import SAMPLE
from repro.checks.registry import checker
from repro.claims.claim import Claim
from repro.claims.outcome import CheckContext, Measurement, NotRun
from repro.data.corpora import get_dataset, resolve_data_dir
from repro.errors import DataError
from repro.files.reader import iter_lines
from repro.files.writer import atomic_write_text
from repro.train.data import prepare_training_data
from repro.train.loop import batcher_for

#: Lines of the WMT sample written as the run's corpus, and the filter's length (some pairs exceed it).
LINES, MAX_LEN = 240, 64
#: Passes taken at least (the first epoch's, if it has more).
PASSES = 8


def _sample_lines() -> tuple[list[str], list[str]]:
    try:
        src, tgt = get_dataset(SAMPLE, resolve_data_dir()).split("train")
    except DataError as err:
        raise NotRun(f"needs the data directory's {SAMPLE} ({err})") from None
    return ([*islice(iter_lines(src, "training corpus", error=DataError), LINES)],
            [*islice(iter_lines(tgt, "training corpus", error=DataError), LINES)])


@checker("run.encoded_tokens")
def encoded_tokens(claim: Claim, ctx: CheckContext) -> Measurement:
    """The job's data path (:func:`~repro.train.data.prepare_training_data`) on 240 lines of real
    WMT text, then the job's batcher (:func:`~repro.train.loop.batcher_for`, with a cap of
    ``params.cap`` padded tokens per pass) over the encoded corpus, its first epoch or its first
    :data:`PASSES` passes, whichever is more. Counted here, line
    by line with the vocabulary the run learned: each line's wordpieces, a target's EOS, the pairs
    the length filter must leave out. The encoded corpus must hold exactly the kept lines'
    wordpieces, each pass must report the tokens of its pairs (targets with EOS) and hold no more
    than the cap, padding and EOS included, and the passes must be those the batcher makes of the
    same pairs as lists. Measured: the number of disagreements (0)."""
    own(ctx)
    cap = int(claim.params.get("cap", 400))
    cfg = job_config(claim.params.get("experiment", "table2-base-ende"))
    sources, targets = _sample_lines()
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="repro-tokens-") as tmp:
        folder = Path(tmp) / "corpus"
        for split in ("train", "dev"):
            atomic_write_text(folder / f"{split}.en", "".join(s + "\n" for s in sources), within=tmp)
            atomic_write_text(folder / f"{split}.de", "".join(t + "\n" for t in targets), within=tmp)
        run_cfg = cfg.replace(dataset=str(folder), data_dir=None, vocab_size=1000, max_len=MAX_LEN,
                              out_dir=str(Path(tmp) / "run"), tokens_per_batch=2 * cap, max_tokens_per_device=cap,
                              device="cpu", precision="fp32")
        data = prepare_training_data(run_cfg)
        pieces = [(data.vocab.tokens(s), data.vocab.tokens(t)) for s, t in zip(sources, targets)]
        kept = [i for i, (s, t) in enumerate(pieces) if len(s) <= MAX_LEN and len(t) <= MAX_LEN]
        encoded = data.examples
        if len(encoded) != len(kept):
            problems.append(f"the encoded corpus holds {len(encoded)} pairs, {len(kept)} are within {MAX_LEN} wordpieces")
        src_len, tgt_len = encoded.lengths() if hasattr(encoded, "lengths") else ([], [])
        for j, i in enumerate(kept[:len(encoded)]):
            s, t = encoded[j]
            if [len(s), len(t)] != [len(pieces[i][0]), len(pieces[i][1])] or \
                    [int(src_len[j]), int(tgt_len[j])] != [len(pieces[i][0]), len(pieces[i][1])]:
                problems.append(f"line {i + 1}: encoded {len(s)} + {len(t)} (lengths() {int(src_len[j])} + "
                                f"{int(tgt_len[j])}), counted {len(pieces[i][0])} + {len(pieces[i][1])}")
                break
        src_count = [len(pieces[i][0]) for i in kept]
        tgt_count = [len(pieces[i][1]) + 1 for i in kept]   # + EOS
        batcher = batcher_for(run_cfg, encoded, 1, 0)
        count = max(len(batcher), PASSES)   # length buckets may close few passes in their first epoch
        passes = []
        for batch in islice(iter(batcher), count):
            idx = list(batch.indices)
            passes.append(idx)
            want = (sum(src_count[i] for i in idx), sum(tgt_count[i] for i in idx))
            if (batch.src_tokens, batch.tgt_tokens) != want:
                problems.append(f"a pass reports {batch.src_tokens} + {batch.tgt_tokens} tokens, its pairs hold "
                                f"{want[0]} + {want[1]} (targets with EOS)")
                break
            padded = len(idx) * max(max(src_count[i] for i in idx), max(tgt_count[i] for i in idx))
            if padded > cap:
                problems.append(f"a pass of {len(idx)} pairs holds {padded} padded tokens (EOS counted), over the cap {cap}")
                break
        as_lists = batcher_for(run_cfg, [(list(s), list(t)) for s, t in encoded], 1, 0)
        if [list(b.indices) for b in islice(iter(as_lists), count)] != passes:
            problems.append("the passes over the encoded corpus differ from those over the same pairs as lists")
    return Measurement(len(problems), detail=(
        f"{len(sources)} lines of {SAMPLE}, {len(kept)} within {MAX_LEN} wordpieces; {len(passes)} passes of at most "
        f"{cap} padded tokens" + ("; " + "; ".join(problems) if problems else ": counts agree")))
