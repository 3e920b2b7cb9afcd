"""Figures. One style for all: colour-blind-safe palette (Okabe-Ito), viridis for matrices."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: jobs run without a display
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from .io import atomic_path  # noqa: E402
from .stats import off_diagonal  # noqa: E402

OKABE_ITO = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]
STYLE = {
    "font.size": 8,
    "axes.titlesize": 9,
    "axes.labelsize": 8,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "legend.fontsize": 7,
    "figure.dpi": 150,
    "savefig.bbox": "tight",
    "axes.prop_cycle": matplotlib.cycler(color=OKABE_ITO),
}


def save_figure(fig: plt.Figure, png: str | Path, pdf: str | Path) -> None:
    for path, fmt in ((png, "png"), (pdf, "pdf")):
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format=fmt)
    plt.close(fig)


def asymmetry_grid(
    matrices: Mapping[tuple[str, int], pd.DataFrame], tasks: Sequence[str], layers: Sequence[int], title: str
) -> plt.Figure:
    """One heat map per (task, layer); cell (row i, column j) = encoder i mapped onto encoder j.

    The colour scale is shared within a task (a row of panels) so layers compare directly.
    """
    with plt.rc_context(STYLE):
        k = len(next(iter(matrices.values())))
        size = max(1.8, 0.22 * k + 1.0)
        fig, axes = plt.subplots(len(tasks), len(layers), figsize=(size * len(layers) + 0.8, size * len(tasks)),
                                 squeeze=False, constrained_layout=True)
        for row, task in enumerate(tasks):
            vmax = max(float(matrices[(task, layer)].to_numpy().max()) for layer in layers) or 1.0
            image = None
            for col, layer in enumerate(layers):
                frame = matrices[(task, layer)]
                ax = axes[row, col]
                image = ax.imshow(frame.to_numpy(), cmap="viridis", vmin=0.0, vmax=vmax)
                ax.set_title(f"{task} · layer {layer}")
                ax.set_xticks(range(k), frame.columns, rotation=90)
                ax.set_yticks(range(k), frame.index if col == 0 else [""] * k)
                ax.set_xlabel("mapped to (j)")
                if col == 0:
                    ax.set_ylabel("mapped from (i)")
            fig.colorbar(image, ax=list(axes[row]), shrink=0.8, label="d_aff(i → j)")
        fig.suptitle(title)
    return fig


def extrinsic_vs_intrinsic(
    pairs: Mapping[tuple[str, int], tuple[pd.DataFrame, pd.DataFrame]],
    tasks: Sequence[str],
    layers: Sequence[int],
    group: Sequence[str] | None,
    title: str,
) -> plt.Figure:
    """Per task: d_psi against d_aff, one point per ordered pair i != j, one colour per layer."""
    from .stats import correlate

    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(1, len(tasks), figsize=(3.0 * len(tasks), 2.8), squeeze=False, constrained_layout=True)
        for col, task in enumerate(tasks):
            ax = axes[0, col]
            for colour, layer in zip(OKABE_ITO, layers):
                intrinsic, extrinsic = pairs[(task, layer)]
                x, y = off_diagonal(intrinsic, group), off_diagonal(extrinsic, group)
                rho = correlate(intrinsic, extrinsic, group)["spearman_rho"]
                ax.scatter(x, y, s=10, alpha=0.8, color=colour, label=f"layer {layer} (ρ = {rho:.2f})")
            ax.set_title(task)
            ax.set_xlabel("intrinsic d_aff(i → j)")
            ax.set_ylabel("extrinsic d_ψ(i → j)" if col == 0 else "")
            ax.set_xlim(left=0)
            ax.set_ylim(bottom=0)
            ax.legend(frameon=False, loc="best")
        fig.suptitle(title)
    return fig
