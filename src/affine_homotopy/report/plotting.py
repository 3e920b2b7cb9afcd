"""Figures. One style for all (:data:`STYLE`): 8-pt text sized for a paper column, the Okabe-Ito
colour-blind-safe palette for categories (markers and line styles as a second cue) and viridis for
matrices. Every figure is saved as PNG (reading) and PDF (vector, for papers) by :func:`save_figure`.

Matrix orientation everywhere: cell (row i, column j) = encoder i mapped onto encoder j.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: jobs run without a display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from ..jobs.io import atomic_path  # noqa: E402
from ..core.stats import group_matrix, off_diagonal  # noqa: E402

OKABE_ITO = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p"]
LINESTYLES = ["-", "--", ":", "-."]
CMAP = "viridis"
COLUMN_WIDTH = 3.25  # inches: one column of a two-column paper
STYLE = {
    "font.size": 8,
    "axes.titlesize": 8,
    "axes.labelsize": 8,
    "xtick.labelsize": 6,
    "ytick.labelsize": 6,
    "legend.fontsize": 6,
    "figure.titlesize": 9,
    "figure.dpi": 200,
    "savefig.dpi": 200,
    "savefig.bbox": "tight",
    "pdf.fonttype": 42,  # embed TrueType: text stays editable/searchable in the PDF
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.prop_cycle": matplotlib.cycler(color=OKABE_ITO),
}


def save_figure(fig: plt.Figure, png: str | Path, pdf: str | Path) -> None:
    for path, fmt in ((png, "png"), (pdf, "pdf")):
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format=fmt)
    plt.close(fig)


def category_style(k: int) -> dict[str, object]:
    """Colour, marker and line style of the k-th category (colours repeat after 8, styles differ)."""
    return {"color": OKABE_ITO[k % len(OKABE_ITO)], "marker": MARKERS[k % len(MARKERS)],
            "linestyle": LINESTYLES[(k // len(OKABE_ITO)) % len(LINESTYLES)]}


def short_labels(names: Sequence[str], width: int = 8) -> list[str]:
    """Short, unique tick labels: a first ``_`` token shared by several names is dropped
    (``multibert_07`` -> ``M07``, ``minilm_svd80`` -> ``svd80``), then names are cut to ``width``."""
    first = [n.split("_", 1)[0] for n in names]
    shared = {t for t in first if first.count(t) > 1}
    out = []
    for name, token in zip(names, first):
        rest = name.split("_", 1)[1] if "_" in name and token in shared else name
        if rest.isdigit():
            rest = token[:1].upper() + rest
        out.append(rest[:width])
    return out if len(set(out)) == len(out) else [n[:width] if len({m[:width] for m in names}) == len(names) else n
                                                  for n in names]


def _strip_heatmap(fig: plt.Figure, spec, matrix: np.ndarray, labels: Sequence[str], vmin: float, vmax: float,
                   title: str, show_ylabels: bool, xlabel: str = "mapped to (j)", ylabel: str = "mapped from (i)",
                   exclude_diagonal: bool = True):
    """Heat map with a column-median strip below and a row-median strip to the right.

    ``exclude_diagonal``: the medians skip cell (i, i) (an encoder mapped onto itself).
    """
    k = len(matrix)
    inner = spec.subgridspec(2, 2, width_ratios=[k, 1.2], height_ratios=[k, 1.2], wspace=0.06, hspace=0.06)
    ax = fig.add_subplot(inner[0, 0])
    off = np.where(np.eye(k, dtype=bool), np.nan, matrix) if exclude_diagonal else matrix
    image = ax.imshow(matrix, cmap=CMAP, vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest")
    ax.set_title(title)
    ax.set_xticks(range(k))
    ax.tick_params(labelbottom=False)
    ax.set_yticks(range(k), labels if show_ylabels else [""] * k)
    if show_ylabels:
        ax.set_ylabel(ylabel)
    cols = fig.add_subplot(inner[1, 0])  # not sharex: shared axes would share the tick labels too
    cols.imshow(np.nanmedian(off, axis=0)[None, :] if k > 1 else matrix[:1], cmap=CMAP, vmin=vmin, vmax=vmax,
                aspect="auto", interpolation="nearest")
    cols.set_xticks(range(k), labels, rotation=90)
    cols.set_yticks([0], ["median" if show_ylabels else ""])
    cols.set_xlabel(xlabel)
    cols.set_xlim(ax.get_xlim())
    rows = fig.add_subplot(inner[0, 1])
    rows.imshow(np.nanmedian(off, axis=1)[:, None] if k > 1 else matrix[:, :1], cmap=CMAP, vmin=vmin, vmax=vmax,
                aspect="auto", interpolation="nearest")
    rows.set_xticks([])  # the row-median strip; its meaning is in the captions (a label here would cost height)
    rows.set_yticks(range(k), [""] * k)
    rows.set_ylim(ax.get_ylim())
    for extra in (cols, rows):
        for side in ("top", "right"):
            extra.spines[side].set_visible(True)
    return ax, image


def asymmetry_grid(
    matrices: Mapping[tuple[str, int], pd.DataFrame], tasks: Sequence[str], layers: Sequence[int], title: str,
    label: str = "d_aff(i → j)",
) -> plt.Figure:
    """Figures 1/4: one heat map per (task, layer) with row- and column-median strips.

    The colour scale is shared within a task (a row of panels) so layers compare directly; a dark
    column ("easy to map onto") shows in the column-median strip below each panel.
    """
    with plt.rc_context(STYLE):
        names = list(next(iter(matrices.values())).index)
        labels = short_labels(names)
        k = len(names)
        size = max(1.6, 0.13 * k + 1.1)
        fig = plt.figure(figsize=(size * len(layers) + 0.9, size * len(tasks) + 0.3), constrained_layout=True)
        outer = fig.add_gridspec(len(tasks), len(layers) + 1, width_ratios=[1.0] * len(layers) + [0.06])
        for row, task in enumerate(tasks):
            values = [matrices[(task, layer)].to_numpy(float) for layer in layers]
            vmax = max(float(np.nanmax(v)) for v in values) or 1.0
            image = None
            for col, (layer, matrix) in enumerate(zip(layers, values)):
                _, image = _strip_heatmap(fig, outer[row, col], matrix, labels, 0.0, vmax, f"{task} · {layer}",
                                          show_ylabels=col == 0)
            fig.colorbar(image, cax=fig.add_subplot(outer[row, -1]), label=label)
        fig.suptitle(title)
    return fig


def extrinsic_vs_intrinsic(
    pairs: Mapping[tuple[str, str], tuple[pd.DataFrame, pd.DataFrame]],
    fits: pd.DataFrame,
    tasks: Sequence[str],
    extrinsic: Sequence[str],
    group: Sequence[str] | None,
    title: str,
    intrinsic_label: str = "d_aff",
) -> plt.Figure:
    """Figure 2: per task (columns) and extrinsic measure (rows), one point per target encoder j.

    A point is the median over sources i != j of (intrinsic, extrinsic), bars the quartiles; light
    dots are all ordered pairs; the line is the least-squares fit over all pairs (``fits`` row with
    columns task, extrinsic, slope, intercept, slope_se, slope_p_permutation, spearman_rho).
    """
    from .analysis import target_medians

    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(len(extrinsic), len(tasks), figsize=(2.3 * len(tasks) + 0.3, 2.2 * len(extrinsic)),
                                 squeeze=False, constrained_layout=True)
        for r, ext in enumerate(extrinsic):
            for c, task in enumerate(tasks):
                ax = axes[r, c]
                x_frame, y_frame = pairs[(task, ext)]
                x, y = off_diagonal(group_matrix(x_frame, group)), off_diagonal(group_matrix(y_frame, group))
                ax.scatter(x, y, s=4, color="0.75", linewidths=0, label="ordered pair", zorder=1)
                med = target_medians(x_frame, y_frame, group)
                ax.errorbar(med["x_to_median"], med["y_to_median"],
                            xerr=[med["x_to_median"] - med["x_to_q1"], med["x_to_q3"] - med["x_to_median"]],
                            yerr=[med["y_to_median"] - med["y_to_q1"], med["y_to_q3"] - med["y_to_median"]],
                            fmt="o", ms=3, color=OKABE_ITO[0], ecolor=OKABE_ITO[0], elinewidth=0.6, capsize=1.5,
                            label="target j: median (IQR)", zorder=3)
                fit = fits[(fits["task"] == task) & (fits["extrinsic"] == ext)].iloc[0]
                if np.isfinite(fit.slope):
                    grid = np.linspace(0, max(float(np.max(x)), 1e-12), 50)
                    ax.plot(grid, fit.slope * grid + fit.intercept, color=OKABE_ITO[3], lw=1, label="least squares",
                            zorder=2)
                ax.text(0.03, 0.97,
                        f"ρ = {fit.spearman_rho:.3f} (p_perm {fit.spearman_p_permutation:.2g})\n"
                        f"y = {fit.slope:.3f} x + {fit.intercept:.3f}\n"
                        f"slope s.e. {fit.slope_se:.3f}, p_perm {fit.slope_p_permutation:.2g}",
                        transform=ax.transAxes, va="top", ha="left", fontsize=5.5,
                        bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "none", "pad": 1})
                ax.set_title(task if r == 0 else "")
                ax.set_xlabel(f"{intrinsic_label}(i → j)" if r == len(extrinsic) - 1 else "")
                ax.set_ylabel(f"{ext}(i → j)" if c == 0 else "")
                ax.set_xlim(left=0)
                ax.set_ylim(bottom=0)
        axes[0, -1].legend(frameon=False, loc="lower right")
        fig.suptitle(title)
    return fig


def rank_vs_distance(per_encoder: pd.DataFrame, correlations: pd.DataFrame, tasks: Sequence[str],
                     layers: Sequence[int], title: str) -> plt.Figure:
    """Rank analysis: numerical rank against median d_aff TO (top) and FROM (bottom) each encoder."""
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(2, len(tasks), figsize=(2.2 * len(tasks) + 0.3, 4.0), squeeze=False,
                                 constrained_layout=True)
        for c, task in enumerate(tasks):
            for r, direction in enumerate(("to", "from")):
                ax = axes[r, c]
                for k, layer in enumerate(layers):
                    part = per_encoder[(per_encoder["task"] == task) & (per_encoder["layer"] == layer)]
                    cor = correlations[(correlations["task"] == task) & (correlations["layer"] == layer)
                                       & (correlations["direction"] == direction)].iloc[0]
                    st = category_style(k)
                    ax.plot(part["rank"], part[f"{direction}_median"], linestyle="none", marker=st["marker"],
                            color=st["color"], ms=3.5, alpha=0.85,
                            label=f"{layer}: ρ = {cor.spearman_rho:.2f} (p {cor.p_permutation:.2g})")
                ax.set_title(f"{task}: median d_aff {'to' if direction == 'to' else 'from'} encoder")
                ax.set_xlabel("numerical rank" if r == 1 else "")
                ax.set_ylabel(f"median d_aff ({direction})" if c == 0 else "")
                ax.legend(frameon=False, loc="best")
        fig.suptitle(title)
    return fig


def layer_trend(table: pd.DataFrame, tasks: Sequence[str], extrinsic: Sequence[str], title: str,
                statistic: str = "spearman") -> plt.Figure:
    """rho(intrinsic, extrinsic) against layer: panels task x extrinsic, one line per intrinsic measure.

    Filled markers: permutation p < 0.05; the band is d_aff's bootstrap interval.
    """
    from .analysis import MEASURE_LABELS

    measures = list(dict.fromkeys(table["intrinsic"]))
    # layer positions in the table's (the config's) order, evenly spaced: labels such as layer4,
    # depth0.50 or last do not sort as numbers
    order = {label: k for k, label in enumerate(dict.fromkeys(table["layer"]))}
    table = table.assign(x=table["layer"].map(order))
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(len(extrinsic), len(tasks), figsize=(2.2 * len(tasks) + 1.2, 2.0 * len(extrinsic)),
                                 squeeze=False, constrained_layout=True, sharey=True)
        for r, ext in enumerate(extrinsic):
            for c, task in enumerate(tasks):
                ax = axes[r, c]
                ax.axhline(0, color="0.6", lw=0.5)
                for k, measure in enumerate(measures):
                    part = table[(table["task"] == task) & (table["extrinsic"] == ext) & (table["intrinsic"] == measure)
                                 & (table["statistic"] == statistic)].sort_values("x")
                    st = category_style(k)
                    ax.plot(part["x"], part["estimate"], color=st["color"], linestyle=st["linestyle"], lw=1,
                            label=MEASURE_LABELS.get(measure, measure))
                    sig = part["p_permutation"] < 0.05
                    ax.scatter(part["x"], part["estimate"], marker=st["marker"], s=12, color=st["color"],
                               facecolors=[st["color"] if s else "white" for s in sig], linewidths=0.8, zorder=3)
                    if measure == "d_aff":
                        ax.fill_between(part["x"], part["ci_low"], part["ci_high"], color=st["color"], alpha=0.15,
                                        linewidth=0)
                ax.set_title(f"{task} · {ext}")
                ax.set_xticks(list(order.values()), list(order), rotation=45 if len(order) > 4 else 0)
                ax.set_xlabel("layer" if r == len(extrinsic) - 1 else "")
                ax.set_ylabel(("Spearman ρ" if statistic == "spearman" else "Pearson r") if c == 0 else "")
        handles, labels = axes[0, 0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside right center", frameon=False)
        fig.suptitle(title)
    return fig


def preorder_graphs(graphs: Mapping[tuple[str, int], dict[str, object]], ranks: Mapping[tuple[str, int], pd.Series],
                    tasks: Sequence[str], layers: Sequence[int], title: str) -> plt.Figure:
    """Hasse-style drawings of the thresholded intrinsic preorder, one panel per (task, layer).

    Nodes are classes of mutually mappable encoders, placed at height = numerical rank (median over
    the class); an arrow a -> b means "a maps onto b" and is drawn only when not implied by others.
    """
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(len(tasks), len(layers), figsize=(2.4 * len(layers) + 0.2, 2.6 * len(tasks)),
                                 squeeze=False, constrained_layout=True)
        for r, task in enumerate(tasks):
            for c, layer in enumerate(layers):
                ax = axes[r, c]
                graph, rank = graphs[(task, layer)], ranks[(task, layer)]
                classes: list[list[str]] = graph["classes"]  # type: ignore[assignment]
                every = [n for cls in classes for n in cls]
                label = dict(zip(every, short_labels(every)))
                heights = np.array([float(np.median([rank[n] for n in cls])) for cls in classes])
                # nodes of (nearly) equal height form one band, spread horizontally
                order = np.argsort(heights, kind="stable")
                span = max(float(np.ptp(heights)), 1.0)
                bands: list[list[int]] = []
                for idx in order:
                    if bands and heights[idx] - heights[bands[-1][-1]] < 0.06 * span:
                        bands[-1].append(int(idx))
                    else:
                        bands.append([int(idx)])
                xs = np.zeros(len(classes))
                for band in bands:
                    xs[band] = np.linspace(-1.2, 1.2, len(band)) if len(band) > 1 else 0.0
                for a, b in graph["edges"]:  # type: ignore[union-attr]
                    ax.annotate("", xy=(xs[b], heights[b]), xytext=(xs[a], heights[a]),
                                arrowprops={"arrowstyle": "-|>", "color": OKABE_ITO[0], "lw": 0.8,
                                            "shrinkA": 7, "shrinkB": 7})
                for k, cls in enumerate(classes):
                    ax.text(xs[k], heights[k], " = ".join(label[n] for n in cls),
                            ha="center", va="center", fontsize=5.5,
                            bbox={"boxstyle": "round,pad=0.2", "facecolor": "#E6F0F8", "edgecolor": OKABE_ITO[0],
                                  "lw": 0.6})
                ax.set_xlim(-2.0, 2.0)
                pad = 0.12 * span
                ax.set_ylim(heights.min() - pad, heights.max() + pad)
                ax.set_xticks([])
                ax.spines["bottom"].set_visible(False)
                ax.set_title(f"{task} · layer {layer} (τ = {graph['threshold']:.3g})")
                ax.set_ylabel("numerical rank" if c == 0 else "")
        fig.suptitle(title)
    return fig


def rank_deficiency_grids(frames: Mapping[str, pd.DataFrame], tasks: Sequence[str], title: str) -> plt.Figure:
    """Figure 3: per task, median d_aff over encoder pairs on a levels x levels grid with median strips.

    Row = truncation level of the mapped-from encoder, column = level of the mapped-to encoder.
    """
    with plt.rc_context(STYLE):
        size = 2.1
        fig = plt.figure(figsize=(size * len(tasks) + 0.8, size + 0.4), constrained_layout=True)
        outer = fig.add_gridspec(1, len(tasks) + 1, width_ratios=[1.0] * len(tasks) + [0.06])
        vmax = max(float(frames[t]["median"].max()) for t in tasks) or 1.0
        image = None
        for c, task in enumerate(tasks):
            frame = frames[task]
            levels = list(dict.fromkeys(frame["level_from"]))
            grid = frame.pivot(index="level_from", columns="level_to", values="median").loc[levels, levels].to_numpy()
            ranks = frame.drop_duplicates("level_from").set_index("level_from")["rank_from"].loc[levels]
            labels = [f"{int(100 * lv)}% ({int(rk)})" for lv, rk in zip(levels, ranks)]
            _, image = _strip_heatmap(fig, outer[0, c], grid, labels, 0.0, vmax, task, show_ylabels=c == 0,
                                      xlabel="mapped-to level (rank)", ylabel="mapped-from level (rank)",
                                      exclude_diagonal=False)
        fig.colorbar(image, cax=fig.add_subplot(outer[0, -1]), label="median d_aff")
        fig.suptitle(title)
    return fig


def training_dynamics(table: pd.DataFrame, title: str) -> plt.Figure:
    """d_aff against training step, one row of panels per (family, task, layer) of ``table`` (the
    output of :func:`affine_homotopy.report.analysis.training_dynamics` with those columns added).

    Left: d_aff(checkpoint → its own final checkpoint), one line per ``line`` (seed), and, dashed,
    the median d_aff(checkpoint → the other seeds' final checkpoints). Right: d_aff between
    checkpoints of different seeds at the same step (median, min–max band). The step axis is
    symmetric-log (linear near 0), as checkpoints are densest early in training.
    """
    keys = list(dict.fromkeys(zip(table["family"], table["task"], table["layer"])))
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(len(keys), 2, figsize=(2 * COLUMN_WIDTH, 2.0 * len(keys) + 0.4), squeeze=False,
                                 constrained_layout=True)
        for r, (family, task, layer) in enumerate(keys):
            part = table[(table["family"] == family) & (table["task"] == task) & (table["layer"] == layer)]
            left, right = axes[r]
            for k, (line, rows) in enumerate(part.groupby("line", sort=False)):
                rows = rows.sort_values("step")
                st = category_style(k)
                left.plot(rows["step"], rows["to_final"], color=st["color"], linestyle=st["linestyle"],
                          marker=st["marker"], ms=2.5, lw=1, label=line or family)
            pooled = part.groupby("step", sort=True)
            if part["to_other_finals_median"].notna().any():
                left.plot(pooled["to_other_finals_median"].median().index, pooled["to_other_finals_median"].median(),
                          color="0.2", linestyle="--", lw=1, label="median → other seeds' final")
            left.set_title(f"{family} · {task} · {layer}: to the final checkpoint")
            left.set_ylabel("d_aff(checkpoint → final)")
            if part["across_median"].notna().any():
                across = pooled.agg(median=("across_median", "median"), low=("across_min", "min"),
                                    high=("across_max", "max"))
                right.plot(across.index, across["median"], color=OKABE_ITO[0], lw=1, marker="o", ms=2.5,
                           label="median over seed pairs")
                right.fill_between(across.index, across["low"], across["high"], color=OKABE_ITO[0], alpha=0.2,
                                   linewidth=0, label="min–max")
                right.legend(frameon=False)
            right.set_title(f"{family} · {task} · {layer}: across seeds, same step")
            right.set_ylabel("d_aff(seed s → seed s′)")
            for ax in (left, right):
                ax.set_xscale("symlog", linthresh=max(1.0, float(part["step"][part["step"] > 0].min()
                                                                   if (part["step"] > 0).any() else 1.0)))
                ax.set_xlabel("training step" if r == len(keys) - 1 else "")
                ax.set_ylim(bottom=0)
            left.legend(frameon=False, ncol=2)
        fig.suptitle(title)
    return fig
