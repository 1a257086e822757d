"""The report's pictures, drawn with matplotlib's Agg canvas (no display, no global backend).

Each :class:`Figure` carries a caption naming the scale, data, hardware and commit behind it.
What cannot be drawn (no run, no logged lr, no dev column) becomes a line in ``missing``.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure as MplFigure
from matplotlib.ticker import NullFormatter

from repro.checks.attention_maps import FIGURE_LAYER, encoder_attention
from repro.data.vocab import SharedVocab
from repro.decode.translate import model_of
from repro.errors import ConfigError, ResultError, UsageError
from repro.files.reader import present
from repro.model import get_preset
from repro.report.runs import Run
from repro.results.provenance import Provenance
from repro.results.store import Result
from repro.train.checkpoint import load_checkpoint
from repro.train.schedule import learning_rate


#: The input sentence of the paper's Figure 3 (the attention maps are drawn for it by default).
FIGURE3_SENTENCE = ("It is in this spirit that a majority of American governments have passed new laws since 2009 "
                    "making the registration or voting process more difficult .")
#: The input sentence of Figures 4 and 5 (anaphora resolution; heads that learned different tasks),
#: drawn beside Figure 3's (claim fig3-5.attention-from-run measures the same attention).
FIGURE4_SENTENCE = ("The Law will never be perfect , but its application should be just - this is what we are "
                    "missing , in my opinion .")


@dataclass(frozen=True)
class Figure:
    name: str  # file stem under figures/
    title: str
    caption: str
    png: bytes


@dataclass
class Figures:
    figures: list[Figure] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


def provenance_line(prov: Provenance | None) -> str:
    if prov is None:
        return "provenance unknown (a run given with --runs and named by no result)"
    return f"scale: {prov.scale}; data: {prov.dataset}; hardware: {prov.hardware}; commit: {prov.commit}; date: {prov.date}"


def _png(fig: MplFigure) -> bytes:
    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    return buffer.getvalue()


def _d_model(run: Run) -> int | None:
    if run.model_config.get("d_model"):
        return int(run.model_config["d_model"])
    cfg = run.train_config
    if (cfg.get("model_overrides") or {}).get("d_model"):
        return int(cfg["model_overrides"]["d_model"])
    if cfg.get("preset"):
        try:
            return get_preset(cfg["preset"]).model.d_model
        except ConfigError:  # an unknown preset only means no Eq. 3 curve
            return None
    return None


def schedule_figure(run: Run) -> Figure | str:
    """Section 5.3, Eq. 3 against the learning rate the run logged."""
    df = run.metrics
    if df is None or "lr" not in df.columns or df["lr"].isna().all():
        return f"{run.path}: no logged lr; Eq. 3 schedule figure not drawn"
    d_model, warmup = _d_model(run), run.train_config.get("warmup_steps")
    if d_model is None or not warmup:
        return f"{run.path}: d_model or warmup_steps unknown; Eq. 3 schedule figure not drawn"
    scale = float(run.train_config.get("lr_scale", 1.0) or 1.0)
    steps = np.unique(np.linspace(1, max(int(df["step"].max()), 2 * int(warmup)), 400).astype(int))
    fig = MplFigure(figsize=(6.4, 3.6))
    ax = fig.add_subplot()
    ax.plot(steps, [learning_rate(int(s), d_model, int(warmup), scale) for s in steps],
            label=f"Eq. 3 (d_model={d_model}, warmup={warmup}" + (f", ×{scale:g})" if scale != 1 else ")"))
    ax.plot(df["step"], df["lr"], "o", markersize=3, label="logged lr")
    ax.axvline(int(warmup), color="grey", linewidth=0.8, linestyle=":")
    ax.set_xlabel("training step")
    ax.set_ylabel("learning rate")
    ax.legend()
    return Figure(f"schedule-{_slug(run.label)}", f"Eq. 3 learning-rate schedule against the logged lr ({run.label})",
                  provenance_line(run.provenance), _png(fig))


def curves_figure(run: Run) -> Figure | str:
    """Training loss (and dev perplexity / BLEU where the log has them) against the step."""
    df = run.metrics
    if df is None or "loss" not in df.columns:
        return f"{run.path}: no training loss logged; curves not drawn"
    fig = MplFigure(figsize=(6.4, 3.6))
    ax = fig.add_subplot()
    ax.plot(df["step"], df["loss"], label="training loss (label-smoothed)")
    if "nll" in df.columns and df["nll"].notna().any():
        ax.plot(df["step"], df["nll"], label="training NLL per token")
    ax.set_xlabel("training step")
    ax.set_ylabel("loss per target token")
    dev = [c for c in ("dev_ppl", "dev_bleu") if c in df.columns and df[c].notna().any()]
    if dev:
        twin = ax.twinx()
        for column in dev:
            points = df.dropna(subset=[column])
            twin.plot(points["step"], points[column], "s--", markersize=4, label=column.replace("_", " "), color="C3")
        if dev == ["dev_ppl"]:
            twin.set_yscale("log")
        twin.set_ylabel(", ".join(c.replace("_", " ") for c in dev))
    # One legend for both axes, so the dev curve's entry never sits on top of the loss's.
    handles = [h for a in fig.axes for h in a.get_legend_handles_labels()[0]]
    ax.legend(handles, [h.get_label() for h in handles], loc="upper right")
    fig.tight_layout()
    caption = provenance_line(run.provenance) + ("" if dev else "; the log has no dev column (dev_ppl, dev_bleu)")
    title = (f"Training loss and {', '.join(c.replace('_', ' ') for c in dev)} ({run.label})" if dev
             else f"Training loss ({run.label})")
    return Figure(f"curves-{_slug(run.label)}", title, caption, _png(fig))


#: What each Table 1 column measures, as stored by repro.checks.table1 in ``extra["points"]``.
_TABLE1_COLUMNS = (("complexity", "flops", "FLOPs per layer"), ("sequential-ops", "depth", "dependent operations"),
                   ("path-length", "max_path", "maximum path length"))


def _series(points: Any, y_key: str) -> tuple[np.ndarray, np.ndarray]:
    """(n, cost) from the stored points: a list of grid points (``n``, ``d``, ``k``/``r``, the
    measured quantity), keeping for each n the widest d so one line shows the growth in n; or
    the plain form ``{"n": [...], "cost": [...]}``."""
    if isinstance(points, dict):
        return np.asarray(points.get("n", []), float), np.asarray(points.get("cost", []), float)
    rows = [q for q in points if isinstance(q, dict) and "n" in q and y_key in q]
    if not rows:
        return np.array([]), np.array([])
    widest = max(q.get("d", 0) for q in rows)
    fixed = [q for q in rows if q.get("d", 0) == widest]
    for key in ("k", "r"):  # one kernel / neighbourhood size per line: the one measured at most n
        counts: dict[Any, int] = {}
        for q in fixed:
            if key in q:
                counts[q[key]] = counts.get(q[key], 0) + 1
        if counts:
            chosen = max(counts, key=lambda v: (counts[v], v))
            fixed = [q for q in fixed if q.get(key) == chosen]
    fixed.sort(key=lambda q: q["n"])
    return np.asarray([q["n"] for q in fixed], float), np.asarray([q[y_key] for q in fixed], float)


def complexity_figure(results: dict[str, Result]) -> Figure | str:
    """Table 1's measurements against n on log-log axes, one panel per column, with fitted slopes."""
    fits = {k: r for k, r in sorted(results.items()) if k.startswith("table1.") and r.extra.get("points")}
    if not fits:
        return "no Table 1 measurement with data points (result.extra['points']); complexity fits not drawn"
    fig = MplFigure(figsize=(12.0, 4.0))
    axes = fig.subplots(1, len(_TABLE1_COLUMNS))
    provs: list[str] = []
    for ax, (column, y_key, label) in zip(axes, _TABLE1_COLUMNS):
        ticks: set[float] = set()
        for claim_id, res in fits.items():
            if not (claim_id.endswith("." + column) or (column == "complexity" and claim_id.count(".") == 1)):
                continue
            x, y = _series(res.extra["points"], y_key if isinstance(res.extra["points"], list) else "cost")
            keep = (x > 0) & (y > 0)
            if keep.sum() < 2:
                continue
            slope, intercept = np.polyfit(np.log(x[keep]), np.log(y[keep]), 1)
            name = claim_id.split(".")[1]
            line = ax.loglog(x[keep], y[keep], "o", label=f"{name}: slope {slope:.2f}")[0]
            ax.loglog(x[keep], np.exp(intercept) * x[keep] ** slope, "-", color=line.get_color(), linewidth=0.8)
            provs.append(provenance_line(res.provenance))
            ticks.update(float(v) for v in x[keep])
        if ticks:  # the measured n as ticks; no minor labels to overlap them
            shown = sorted(ticks)
            shown = shown[:: max(1, math.ceil(len(shown) / 6))]
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set_xticks(shown, [f"{v:g}" for v in shown])
        ax.set_xlabel("sequence length n")
        ax.set_ylabel(label)
        ax.set_title(column.replace("-", " "), fontsize="medium")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize="x-small")
    if not provs:
        return "Table 1 measurements have fewer than two positive data points; complexity fits not drawn"
    fig.tight_layout()
    caption = "Slopes are fitted on the widest d measured; " + " | ".join(dict.fromkeys(provs))
    return Figure("table1-fits", "Table 1: measured growth in n, log-log, with fitted slopes", caption, _png(fig))


def attention_figure(model: Any, src_ids: Sequence[int], tokens: Sequence[str], *,
                     caption: str = "", name: str = "attention") -> Figure:
    """Encoder self-attention of every head of the layer Figures 3-5 show, in their manner: the
    weights the claims measure (:func:`repro.checks.attention_maps.encoder_attention`, dropout off).

    ``model`` is a :class:`repro.model.Transformer`; ``src_ids`` the encoded sentence,
    ``tokens`` its wordpieces (labels of both axes)."""
    weights = encoder_attention(model, src_ids).float().cpu().numpy()  # (heads, n, n)
    heads = weights.shape[0]
    cols = min(2, heads)  # two heads per row: labels stay legible at the page's width
    rows = math.ceil(heads / cols)
    size = max(3.2, 0.26 * len(tokens))
    fig = MplFigure(figsize=(cols * size, rows * size))
    for h in range(heads):
        ax = fig.add_subplot(rows, cols, h + 1)
        ax.imshow(weights[h], cmap="Blues", vmin=0.0, vmax=float(weights[h].max()) or 1.0)
        ax.set_title(f"head {h + 1}", fontsize=10)
        ax.set_xticks(range(len(tokens)), list(tokens), rotation=90, fontsize=8)
        ax.set_yticks(range(len(tokens)), list(tokens), fontsize=8)
    fig.tight_layout()
    layer_no = FIGURE_LAYER if FIGURE_LAYER >= 0 else len(model.encoder_layers) + FIGURE_LAYER
    title = f"Encoder self-attention, layer {layer_no + 1}, all {heads} heads (rows attend to columns; colour scaled per head)"
    return Figure(name, title, caption, _png(fig))


def run_attention_figure(run: Run, sentence: str) -> Figure | str:
    """Attention maps of the newest checkpoint of ``run`` (needs ``vocab.json`` beside it)."""
    ckpt, vocab_path = run.newest_checkpoint(), run.path / "vocab.json"
    if ckpt is None or not present(vocab_path, "vocabulary", error=ResultError):
        return f"{run.path}: no checkpoint or vocab.json; attention maps not drawn"
    state = load_checkpoint(ckpt)
    model = model_of(state, ckpt)
    vocab = SharedVocab.load(vocab_path)
    ids = vocab.encode(sentence)
    if len(ids) > model.cfg.max_positions:
        raise UsageError(f"--attention-sentence: {len(ids)} tokens, more than the {model.cfg.max_positions} positions "
                         f"of the model of {ckpt}; give a shorter sentence")
    tokens = [vocab.decode([i]).strip() or "·" for i in ids]
    caption = f"{ckpt.name}; sentence: {sentence!r}; " + provenance_line(run.provenance)
    return attention_figure(model, ids, tokens, caption=caption, name=f"attention-{_slug(run.label)}")


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in text)[:60] or "run"


def draw(results: dict[str, Result], runs: list[Run], attention_sentence: str | None = None) -> Figures:
    out = Figures()

    def add(item: Figure | str) -> None:
        (out.figures if isinstance(item, Figure) else out.missing).append(item)

    add(complexity_figure(results))
    if not runs:
        out.missing.append("no training run found (no result names a run_dir; none given with --runs): "
                           "no Eq. 3, training-curve or attention figures")
    for run in runs:
        out.missing.extend(run.notes)
        if run.metrics is not None:
            add(schedule_figure(run))
            add(curves_figure(run))
        if attention_sentence and run.path.is_dir():  # an absent run is noted once, by load_run
            add(run_attention_figure(run, attention_sentence))
            if attention_sentence == FIGURE3_SENTENCE:  # and the sentence of Figures 4 and 5
                drawn = run_attention_figure(run, FIGURE4_SENTENCE)
                add(drawn if isinstance(drawn, str) else Figure(drawn.name + "-figures-4-5", drawn.title.replace(
                    "Encoder self-attention", "Figures 4-5: encoder self-attention"), drawn.caption, drawn.png))
    seen: dict[str, int] = {}
    for i, fig in enumerate(out.figures):  # two runs with one label must not share a file
        seen[fig.name] = seen.get(fig.name, 0) + 1
        if seen[fig.name] > 1:
            out.figures[i] = Figure(f"{fig.name}-{seen[fig.name]}", fig.title, fig.caption, fig.png)
    return out
