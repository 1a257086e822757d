"""EVALB's printed report (evalb.c ``individual_result`` and ``print_total``), byte for byte."""

from __future__ import annotations

from repro.eval.evalb import EvalbResult


def format_report(result: EvalbResult) -> str:
    """The text evalb.c prints on stdout (per-sentence table and both summaries)."""
    out = ["  Sent.                        Matched  Bracket   Cross        Correct Tag",
           " ID  Len.  Stat. Recal  Prec.  Bracket gold test Bracket Words  Tags Accracy",
           "=" * 76]
    for r in result.rows:
        acc = 100.0 * r.correct_tags / r.words if r.words else 0.0
        out.append(f"{r.line:4d}  {r.length:3d}    {r.status:d}  {r.recall:6.2f} {r.precision:6.2f}   "
                   f"{r.matched:3d}    {r.gold_brackets:3d}  {r.test_brackets:3d}    {r.crossing:3d}"
                   f"   {r.words:4d}  {r.correct_tags:4d}   {acc:6.2f}")
    out.append("=" * 76)
    total, tail = result.all, ""
    if total.gold_brackets > 0 and total.test_brackets > 0:
        tail = (f"                {total.recall:6.2f} {total.precision:6.2f} {total.matched:6d} "
                f"{total.gold_brackets:5d} {total.test_brackets:5d}  {total.crossing:5d}")
    out.append(tail + f"  {total.words:5d} {total.correct_tags:5d}   {total.tagging_accuracy:6.2f}")
    out.append("=== Summary ===")
    for title, s in (("All", total), (f"len<={result.params.cutoff_len}", result.cutoff)):
        out += ["", f"-- {title} --",
                f"Number of sentence        = {s.sentences:6d}",
                f"Number of Error sentence  = {s.error_sentences:6d}",
                f"Number of Skip  sentence  = {s.skipped_sentences:6d}",
                f"Number of Valid sentence  = {s.valid_sentences:6d}",
                f"Bracketing Recall         = {s.recall:6.2f}",
                f"Bracketing Precision      = {s.precision:6.2f}",
                f"Bracketing FMeasure       = {s.f1:6.2f}",
                f"Complete match            = {s.complete_match:6.2f}",
                f"Average crossing          = {s.average_crossing:6.2f}",
                f"No crossing               = {s.no_crossing_pct:6.2f}",
                f"2 or less crossing        = {s.two_or_less_crossing_pct:6.2f}",
                f"Tagging accuracy          = {s.tagging_accuracy:6.2f}"]
    return "\n".join(out) + "\n"
