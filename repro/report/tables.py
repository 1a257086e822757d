"""The paper's Tables 1-4, rebuilt with measured columns beside the paper's.

Paper values of the Transformer rows come from the claims (``claims/*.toml``); the rows of
other systems (Tables 2 and 4) are the paper's own context and are printed as such, never as
measurements. A measured cell reads ``value (status; scale)``, where scale is the scale of
the run that produced it, so a laptop number can never pass for the paper's.
"""

from __future__ import annotations

import pandas as pd

from repro.report.build import ReportData
from repro.report.verdict import result_scale
from repro.report.values import MISSING, exponents, show

#: Table 1 rows and columns; a measurement is stored under ``table1.<row key>.<column key>``,
#: its value the fitted exponent(s) (a number for n, or a mapping such as {"n": 2.0, "d": 1.0}).
TABLE1_ROWS = (
    ("Self-Attention", "self-attention", ("O(n²·d)", "O(1)", "O(1)")),
    ("Recurrent", "recurrent", ("O(n·d²)", "O(n)", "O(n)")),
    ("Convolutional", "convolutional", ("O(k·n·d²)", "O(1)", "O(log_k(n))")),
    ("Self-Attention (restricted)", "restricted", ("O(r·n·d)", "O(1)", "O(n/r)")),
)
TABLE1_COLUMNS = (("Complexity per layer", "complexity"), ("Sequential operations", "sequential-ops"),
                  ("Maximum path length", "path-length"))

#: Other systems of Table 2 (BLEU EN-DE, BLEU EN-FR, cost EN-DE, cost EN-FR), the paper's figures.
TABLE2_OTHERS = (
    ("ByteNet", 23.75, None, None, None),
    ("Deep-Att + PosUnk", None, 39.2, None, 1.0e20),
    ("GNMT + RL", 24.6, 39.92, 2.3e19, 1.4e20),
    ("ConvS2S", 25.16, 40.46, 9.6e18, 1.5e20),
    ("MoE", 26.03, 40.56, 2.0e19, 1.2e20),
    ("Deep-Att + PosUnk Ensemble", None, 40.4, None, 8.0e20),
    ("GNMT + RL Ensemble", 26.30, 41.16, 1.8e20, 1.1e21),
    ("ConvS2S Ensemble", 26.36, 41.29, 7.7e19, 1.2e21),
)

#: Other parsers of Table 4 (parser, training, WSJ 23 F1), the paper's figures.
TABLE4_OTHERS = (
    ("Vinyals & Kaiser et al. (2014)", "WSJ only, discriminative", 88.3),
    ("Petrov et al. (2006)", "WSJ only, discriminative", 90.4),
    ("Zhu et al. (2013)", "WSJ only, discriminative", 90.4),
    ("Dyer et al. (2016)", "WSJ only, discriminative", 91.7),
    ("Zhu et al. (2013)", "semi-supervised", 91.3),
    ("Huang & Harper (2009)", "semi-supervised", 91.3),
    ("McClosky et al. (2006)", "semi-supervised", 92.1),
    ("Vinyals & Kaiser et al. (2014)", "semi-supervised", 92.1),
    ("Luong et al. (2015)", "multi-task", 93.0),
    ("Dyer et al. (2016)", "generative", 93.3),
)


def paper(report: ReportData, claim_id: str) -> str:
    row = report.row(claim_id)
    if row is None:
        return MISSING
    return f"target: {show(row.claim.expected)}" if row.claim.target else show(row.claim.expected)


def measured(report: ReportData, claim_id: str, fmt=show) -> str:
    """``value (status; scale)`` for a claim, or its status alone when nothing was measured."""
    row = report.row(claim_id)
    result = report.results.get(claim_id)
    if row is None:
        return f"{fmt(result.measured)} (no claim; {result_scale(result)})" if result is not None else MISSING
    if row.result is None:
        return f"{MISSING} ({row.status})"
    return f"{fmt(row.result.measured)} ({row.status}; {result_scale(row.result)})"


def table1(report: ReportData) -> pd.DataFrame:
    rows = []
    for label, key, claimed in TABLE1_ROWS:
        row = {"Layer type": label}
        for (column, ckey), paper_value in zip(TABLE1_COLUMNS, claimed):
            row[f"{column} (paper)"] = paper_value
            row[f"{column} (fitted)"] = measured(report, f"table1.{key}.{ckey}", exponents)
        rows.append(row)
    return pd.DataFrame(rows)


def table2(report: ReportData, cost_from_step_time: dict[str, float | None] | None = None) -> pd.DataFrame:
    cost_from_step_time = cost_from_step_time or {}
    rows = [
        {"Model": name, "BLEU EN-DE (paper)": show(de), "BLEU EN-DE (measured)": "",
         "BLEU EN-FR (paper)": show(fr), "BLEU EN-FR (measured)": "", "Cost EN-DE (paper)": show(cde),
         "Cost EN-FR (paper)": show(cfr), "Cost, Section 5.2 × footnote 5": "", "Cost from measured step time": ""}
        for name, de, fr, cde, cfr in TABLE2_OTHERS
    ]
    for size, label in (("base", "Transformer (base model)"), ("big", "Transformer (big)")):
        rows.append({
            "Model": label,
            "BLEU EN-DE (paper)": paper(report, f"table2.bleu.{size}-ende"),
            "BLEU EN-DE (measured)": measured(report, f"table2.bleu.{size}-ende"),
            "BLEU EN-FR (paper)": paper(report, f"table2.bleu.{size}-enfr"),
            "BLEU EN-FR (measured)": measured(report, f"table2.bleu.{size}-enfr"),
            "Cost EN-DE (paper)": paper(report, f"table2.cost.{size}"),
            "Cost EN-FR (paper)": paper(report, f"table2.cost.{size}"),
            "Cost, Section 5.2 × footnote 5": measured(report, f"table2.cost.{size}"),
            "Cost from measured step time": show(cost_from_step_time.get(size)),
        })
    return pd.DataFrame(rows)


def table3_rows(report: ReportData) -> list[str]:
    """Table 3's rows in the order of the claims file (``table3.ppl.<row>``)."""
    return [r.claim.id.split(".", 2)[2] for r in report.rows if r.claim.id.startswith("table3.ppl.")]


def table3(report: ReportData) -> pd.DataFrame:
    rows = []
    for name in table3_rows(report):
        source = report.row(f"table3.ppl.{name}").claim.source
        rows.append({
            "row": name,
            "variation": source.split("row", 1)[-1].strip() if "row" in source else source,
            "PPL dev (paper)": paper(report, f"table3.ppl.{name}"),
            "PPL dev (measured)": measured(report, f"table3.ppl.{name}"),
            "BLEU dev (paper)": paper(report, f"table3.bleu.{name}"),
            "BLEU dev (measured)": measured(report, f"table3.bleu.{name}"),
            "params ×10^6 (paper)": paper(report, f"table3.params.{name}"),
            "params ×10^6 (measured)": measured(report, f"table3.params.{name}"),
        })
    return pd.DataFrame(rows)


def table4(report: ReportData) -> pd.DataFrame:
    rows = [{"Parser": p, "Training": t, "WSJ 23 F1 (paper)": show(f), "WSJ 23 F1 (measured)": ""}
            for p, t, f in TABLE4_OTHERS]
    rows.insert(4, {"Parser": "Transformer (4 layers)", "Training": "WSJ only, discriminative",
                    "WSJ 23 F1 (paper)": paper(report, "table4.f1.wsj-only"),
                    "WSJ 23 F1 (measured)": measured(report, "table4.f1.wsj-only")})
    rows.insert(10, {"Parser": "Transformer (4 layers)", "Training": "semi-supervised",
                     "WSJ 23 F1 (paper)": paper(report, "table4.f1.semi"),
                     "WSJ 23 F1 (measured)": measured(report, "table4.f1.semi")})
    if "local.ptb-sample.f1" in report.results:  # a local measurement without a claim
        rows.append({"Parser": "this project, local scale (not comparable)",
                     "Training": "NLTK PTB sample, WSJ 00-01", "WSJ 23 F1 (paper)": MISSING,
                     "WSJ 23 F1 (measured)": measured(report, "local.ptb-sample.f1")})
    return pd.DataFrame(rows)
