"""The paper's analyses on top of the distance matrices: Table 1, Figure 2 fits, rank analysis,
the intrinsic preorder, Figure 3's rank-deficiency grid and the comparison with the paper.

All functions take matrices in the project's orientation (cell ``(i, j)`` = encoder ``i`` mapped
onto encoder ``j``) and restrict to an encoder ``group`` (``None`` = all) in config order. The
statistics' conventions are those of :mod:`affine_homotopy.core.stats`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..core import stats
from ..core.measures import LABELS, LATEX_LABELS

if TYPE_CHECKING:  # the engine (and torch) is imported only where the solver runs
    from ..core.intrinsic import IntrinsicSettings

# Display names (Markdown / LaTeX / figures): the measure registry's
MEASURE_LABELS = LABELS
STAT_LABELS = {"spearman": "ρ", "pearson": "r"}
Loader = Callable[[str, int, str], pd.DataFrame]  # (task, layer, measure) -> K x K matrix


# ----------------------------------------------------------------------------------------------
# Table 1


def correlation_table(
    tasks: Sequence[str], layers: Sequence[int], intrinsic: Sequence[str], extrinsic: Sequence[str],
    load_intrinsic: Loader, load_extrinsic: Loader, group: Sequence[str] | None = None,
    n_permutations: int = 10_000, n_bootstrap: int = 2_000, seed: int = 0, level: float = 0.95,
    progress: Callable[[str], None] | None = None,
) -> pd.DataFrame:
    """Long table: one row per (task, layer, intrinsic, extrinsic, statistic); see stats.full_correlation.

    Every cell uses the same seed, so all measures of a (task, layer) share the same permutations and
    resamples (common random numbers: differences between measures are not resampling noise).
    """
    rows = []
    for task in tasks:
        for layer in layers:
            for ext in extrinsic:
                y = load_extrinsic(task, layer, ext)
                for measure in intrinsic:
                    for record in stats.full_correlation(load_intrinsic(task, layer, measure), y, group,
                                                         n_permutations, n_bootstrap, seed, level):
                        rows.append({"task": task, "layer": layer, "intrinsic": measure, "extrinsic": ext, **record})
            if progress:
                progress(f"{task} layer {layer} done")
    return pd.DataFrame(rows)


def _fmt(value: float, digits: int = 3) -> str:
    return "nan" if not np.isfinite(value) else f"{value:.{digits}f}"


def paper_layout(table: pd.DataFrame, layer: int, with_ci: bool = True, latex: bool = False) -> pd.DataFrame:
    """Table 1's layout for one layer: rows task x extrinsic x statistic, columns intrinsic measures.

    Cells: estimate with stars by the **permutation** p (``*`` < 0.05, ``**`` < 0.01), and with
    ``with_ci`` the bootstrap interval in brackets.
    """
    part = table[table["layer"] == layer]
    measures = list(dict.fromkeys(part["intrinsic"]))
    labels = LATEX_LABELS if latex else MEASURE_LABELS
    rows = []
    for (task, ext, stat), block in part.groupby(["task", "extrinsic", "statistic"], sort=False):
        row = {"task": task, "extrinsic": labels.get(ext, ext), "stat": (r"$\rho$" if stat == "spearman" else "$r$")
               if latex else STAT_LABELS[stat]}
        for measure, cell in zip(block["intrinsic"], block.itertuples(index=False)):
            star = stats.stars(cell.p_permutation)
            text = _fmt(cell.estimate) + (f"$^{{{star}}}$" if latex and star else star)
            if with_ci:
                text += f" [{_fmt(cell.ci_low, 2)}, {_fmt(cell.ci_high, 2)}]"
            row[labels.get(measure, measure)] = text
        rows.append(row)
    frame = pd.DataFrame(rows)
    return frame[["task", "extrinsic", "stat", *[labels.get(m, m) for m in measures]]]


def table_markdown(table: pd.DataFrame, layers: Sequence[int], table_layer: int, run: str, group_note: str) -> str:
    first = table.iloc[0] if len(table) else None
    n_perm = "" if first is None else (f"all {first.n_permutations} permutations (exact)" if first.exact
                                         else f"{first.n_permutations} random permutations")
    parts = [
        f"# Table 1 — intrinsic vs extrinsic distance (run `{run}`)\n",
        f"Spearman ρ and Pearson r over ordered encoder pairs i ≠ j ({group_note}). Stars: Mantel "
        f"permutation p (encoder labels permuted jointly on rows and columns; {n_perm}): `*` p < 0.05, "
        f"`**` p < 0.01. Brackets: {int(100 * float(first.ci_level)) if first is not None else 95} % "
        f"bootstrap interval over encoders. Classical p-values (which assume independent pairs) are in "
        f"`correlation.csv`.\n",
    ]
    ordered = [table_layer] + [layer for layer in layers if layer != table_layer]
    for layer in ordered:
        title = f"## Layer position {layer}" + (" (Table 1: the table layer)" if layer == table_layer else "")
        parts.append(f"{title}\n\n" + stats.to_markdown(paper_layout(table, layer)))
    return "\n".join(parts)


def table_latex(table: pd.DataFrame, layer: int, run: str) -> str:
    """A booktabs ``table`` environment in the paper's layout (estimates with permutation stars)."""
    frame = paper_layout(table, layer, with_ci=False, latex=True)
    columns = list(frame.columns[3:])
    lines = [
        r"% Generated by the affine-homotopy workflow (run " + run.replace("_", r"\_") + "); needs \\usepackage{booktabs}",
        r"\begin{table}[t]", r"\centering", r"\small",
        r"\begin{tabular}{lll" + "r" * len(columns) + "}", r"\toprule",
        " & ".join(["Task", "Extrinsic", "", *columns]) + r" \\", r"\midrule",
    ]
    previous = None
    for row in frame.itertuples(index=False):
        task = str(row[0]).replace("_", r"\_")
        if previous is not None and task != previous:
            lines.append(r"\midrule")
        lines.append(" & ".join([task if task != previous else "", str(row[1]), str(row[2]), *map(str, row[3:])]) + r" \\")
        previous = task
    lines += [
        r"\bottomrule", r"\end{tabular}",
        r"\caption{Spearman $\rho$ and Pearson $r$ between intrinsic and extrinsic distances over ordered "
        rf"encoder pairs, layer position {layer}. $^{{*}}$: $p<0.05$, $^{{**}}$: $p<0.01$ by a Mantel permutation test "
        r"over encoder labels.}", r"\label{tab:intrinsic-extrinsic}", r"\end{table}", "",
    ]
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# Figure 2


def target_medians(intrinsic: pd.DataFrame, extrinsic: pd.DataFrame, group: Sequence[str] | None = None) -> pd.DataFrame:
    """Per target encoder j: median and quartiles over sources i != j of both distances."""
    x, y = stats.median_summary(intrinsic, group), stats.median_summary(extrinsic, group)
    cols = ["to_q1", "to_median", "to_q3"]
    return pd.concat([x[["encoder"]], x[cols].add_prefix("x_"), y[cols].add_prefix("y_")], axis=1)


def regression_fit(intrinsic: pd.DataFrame, extrinsic: pd.DataFrame, group: Sequence[str] | None = None,
                   n_permutations: int = 10_000, seed: int = 0) -> dict[str, float]:
    """Least squares ``extrinsic = slope * intrinsic + intercept`` over the ordered pairs i != j.

    ``slope_p`` is the classical t-test (independent pairs); ``slope_p_permutation`` the Mantel p of
    Pearson r, which is the same test of a zero slope without the independence assumption.
    """
    # exact pairs tie at 0, as in Table 1 (stats.tie_exact_pairs)
    x_m = stats.tie_exact_pairs(stats.group_matrix(intrinsic, group))
    y_m = stats.tie_exact_pairs(stats.group_matrix(extrinsic, group))
    x, y = stats.off_diagonal(x_m), stats.off_diagonal(y_m)
    if len(x) < 3 or np.ptp(x) == 0:
        nan = float("nan")
        return dict(n_pairs=len(x), slope=nan, intercept=nan, slope_se=nan, intercept_se=nan, slope_p=nan,
                    slope_p_permutation=nan, spearman_rho=nan, spearman_p_permutation=nan, pearson_r=nan)
    from scipy import stats as sps  # here, not at the top: most jobs that import this module never need it

    fit = sps.linregress(x, y)
    rho = stats.mantel(x_m, y_m, "spearman", n_permutations, seed)
    r = stats.mantel(x_m, y_m, "pearson", n_permutations, seed)
    return dict(n_pairs=len(x), slope=float(fit.slope), intercept=float(fit.intercept), slope_se=float(fit.stderr),
                intercept_se=float(fit.intercept_stderr), slope_p=float(fit.pvalue), slope_p_permutation=r.p_value,
                spearman_rho=rho.statistic, spearman_p_permutation=rho.p_value, pearson_r=r.statistic)


# ----------------------------------------------------------------------------------------------
# Rank analysis


def rank_analysis(ranks: pd.DataFrame, d_aff: pd.DataFrame, group: Sequence[str] | None = None,
                  n_permutations: int = 10_000, seed: int = 0) -> tuple[pd.DataFrame, list[dict[str, float | str]]]:
    """Each encoder's numerical rank beside its median d_aff TO it and FROM it, and their Spearman rho.

    ``ranks``: the intrinsic stage's ``rank.csv`` (columns encoder, rank). Returns the per-encoder
    frame and one record per direction (``to``, ``from``) with rho, classical and permutation p
    (permuting the ranks among encoders; exact when K! <= n_permutations).
    """
    summary = stats.median_summary(d_aff, group)
    merged = summary.merge(ranks[["encoder", "rank"]], on="encoder", how="left")
    records: list[dict[str, float | str]] = []
    for direction in ("to", "from"):
        values = merged[f"{direction}_median"].to_numpy(float)
        rank = merged["rank"].to_numpy(float)
        rho, p_perm = stats.permutation_test_vectors(rank, values, n_permutations, seed)
        from scipy import stats as sps

        p_classical = float(sps.spearmanr(rank, values)[1]) if np.isfinite(rho) else float("nan")
        records.append({"direction": direction, "spearman_rho": rho, "p_classical": p_classical,
                        "p_permutation": p_perm, "n_encoders": len(merged)})
    return merged, records


# ----------------------------------------------------------------------------------------------
# Intrinsic preorder


def preorder(d_aff: pd.DataFrame, fraction: float) -> dict[str, object]:
    """The thresholded preorder ``i >= j`` (edge i -> j: i maps onto j) and its transitive reduction.

    Edge ``i -> j`` when ``d_aff(i, j) <= fraction * median of the off-diagonal values``. The relation
    is closed transitively (boolean Warshall), encoders reachable from each other are merged into one
    class (``i`` and ``j`` mutually mappable), and the reduction keeps a class edge ``a -> b`` only when
    no third class ``c`` has ``a -> c -> b``. Returns ``threshold``, ``classes`` (lists of names),
    ``edges`` (class index pairs of the reduction) and ``relation`` (K x K bool, the thresholded edges).
    """
    names = list(d_aff.index)
    values = d_aff.to_numpy(float)
    k = len(names)
    threshold = float(fraction * np.median(stats.off_diagonal(values)))
    relation = (values <= threshold) & ~np.eye(k, dtype=bool)
    closure = relation | np.eye(k, dtype=bool)
    for m in range(k):  # Warshall, vectorised over (i, j)
        closure |= closure[:, [m]] & closure[[m], :]
    mutual = closure & closure.T
    class_of = np.full(k, -1)
    classes: list[list[str]] = []
    for i in range(k):
        if class_of[i] < 0:
            members = np.flatnonzero(mutual[i])
            class_of[members] = len(classes)
            classes.append([names[m] for m in members])
    reps = np.array([names.index(c[0]) for c in classes])
    reach = closure[np.ix_(reps, reps)] & ~np.eye(len(reps), dtype=bool)
    # a -> b is implied when a -> c and c -> b for some c
    implied = (reach.astype(int) @ reach.astype(int)) > 0
    reduction = reach & ~implied
    edges = [(int(a), int(b)) for a, b in zip(*np.nonzero(reduction))]
    return {"threshold": threshold, "classes": classes, "edges": edges, "relation": relation}


# ----------------------------------------------------------------------------------------------
# Figure 3: rank deficiency


def rank_deficiency(
    representations: Mapping[str, np.ndarray], levels: Sequence[float], settings: IntrinsicSettings | None = None,
    log: Callable[[str], None] | None = None,
) -> pd.DataFrame:
    """d_aff between every pair of truncation levels, summarised over ordered encoder pairs.

    Each encoder's fit-split representation is SVD-truncated (:func:`derived.svd_truncate`) to each
    fraction of its numerical rank; d_aff is computed for every ordered pair of truncated
    representations in one engine call. For levels ``(a, b)`` the summary is over ordered encoder
    pairs ``i != j`` (``(i, a)`` mapped onto ``(j, b)``); with a single encoder, over ``i = j``.
    ``settings``: the rank rule and the minimax solver (the intrinsic stage's, with the grid's own
    ``tol`` and ``max_iter``: :func:`affine_homotopy.study.settings.intrinsic_settings`; default ``tol`` 1e-2, ``max_iter``
    100); only ``d_aff`` is computed. Returns a long frame: ``level_from, level_to, rank_from,
    rank_to`` (median kept ranks), ``median, q1, q3, n_pairs``, ``unconverged`` (pairs of the cell
    stopped by ``max_iter`` before reaching ``tol``).
    """
    from dataclasses import replace

    from ..models.derived import svd_truncate
    from ..core.intrinsic import IntrinsicSettings, pairwise_intrinsic
    from ..core.linalg import factorise

    settings = replace(settings or IntrinsicSettings(tol=1e-2, max_iter=100), measures=("d_aff",))
    rank_multiplier, tol, max_iter = settings.rank_multiplier, settings.tol, settings.max_iter

    names = list(representations)
    reps, keys, kept = [], [], []
    for name in names:
        factors = factorise(representations[name], rank_multiplier)  # once per encoder, shared by every level
        for level in levels:
            truncated, _, keep = svd_truncate(representations[name], representations[name][:1], level, rank_multiplier,
                                              factors)
            reps.append(truncated.astype(np.float32))
            keys.append((name, level))
            kept.append(keep)
    if log:
        log(f"{len(reps)} truncated representations, {len(reps) * (len(reps) - 1)} ordered pairs")
    result = pairwise_intrinsic(reps, [f"{n}@{lv}" for n, lv in keys], settings)
    matrix = result.matrices["d_aff"].reshape(len(names), len(levels), len(names), len(levels))
    missed = ~result.converged.reshape(matrix.shape)
    if log and missed.any():
        log(f"warning: {int(missed.sum())} of {len(reps) * (len(reps) - 1)} pairs stopped at max_iter = {max_iter} "
            f"without reaching tol = {tol:g} (their intervals are still certified); raise "
            "analysis.rank_deficiency.max_iter or tol")
    kept_arr = np.array(kept).reshape(len(names), len(levels))
    pairs = [(i, j) for i in range(len(names)) for j in range(len(names)) if i != j] or [(0, 0)]
    rows = []
    for a, level_a in enumerate(levels):
        for b, level_b in enumerate(levels):
            values = np.array([matrix[i, a, j, b] for i, j in pairs])
            q1, median, q3 = np.percentile(values, [25, 50, 75])
            rows.append({"level_from": level_a, "level_to": level_b, "rank_from": float(np.median(kept_arr[:, a])),
                         "rank_to": float(np.median(kept_arr[:, b])), "median": median, "q1": q1, "q3": q3,
                         "n_pairs": len(values), "unconverged": int(sum(missed[i, a, j, b] for i, j in pairs))})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------------------------
# Comparison with the paper


def paper_comparison(table: pd.DataFrame, layer: int, run: str, paper: pd.DataFrame | None, source: str = "") -> str:
    """Markdown: our Table 1 (layer ``layer``) beside the paper's numbers and the difference.

    ``paper``: columns ``task, extrinsic, intrinsic, statistic, value, significant`` (the paper's
    star, p < 0.01 assuming independent pairs). ``None``: our numbers only. Cells are joined on
    task, extrinsic, intrinsic and statistic.
    """
    ours = table[table["layer"] == layer].copy()
    ours["ours"] = [_fmt(e) + stats.stars(p) for e, p in zip(ours["estimate"], ours["p_permutation"])]
    ours["CI"] = [f"[{_fmt(lo, 2)}, {_fmt(hi, 2)}]" for lo, hi in zip(ours["ci_low"], ours["ci_high"])]
    ours["p (permutation)"] = ours["p_permutation"]
    ours["p (classical)"] = ours["p_classical"]
    columns = ["task", "extrinsic", "intrinsic", "statistic", "ours", "CI", "p (permutation)", "p (classical)"]
    head = [f"# Comparison with the paper's Table 1 (run `{run}`, layer {layer})\n"]
    if paper is not None:
        merged = ours.merge(paper, on=["task", "extrinsic", "intrinsic", "statistic"], how="left")
        merged["paper"] = [("" if not np.isfinite(v) else _fmt(v) + ("*" if s else "")) for v, s in
                           zip(merged["value"], merged["significant"].fillna(False).astype(bool))]
        merged["ours − paper"] = [_fmt(o - v) if np.isfinite(v) else "" for o, v in zip(merged["estimate"], merged["value"])]
        columns = columns[:5] + ["paper", "ours − paper"] + columns[5:]
        ours = merged
        head.append(
            f"The paper's column is {source} (final layer, 600 ordered MultiBERT pairs; its `*` = p < 0.01 "
            "assuming independent pairs). Ours: `*` p < 0.05, `**` p < 0.01 by the Mantel permutation test; "
            "CI: bootstrap over encoders. Blank paper cells: measures or tasks the paper did not report. "
            "Note the paper's d_Aff is a least-squares fit evaluated at its maximum (ours: the certified "
            "minimax value; `d_aff_ls` is the paper's protocol). The paper's d^H_V rows are compared with our "
            "paper-style `d_worst` (the largest fixed-classifier distance over the task probe and random-label "
            "probes fitted by the paper's SGD protocol); `d_worst_search` (our searched worst case in a norm "
            "ball, opt-in: `extrinsic.measures`) has no paper counterpart.\n")
        matched = merged.dropna(subset=["value"])
        if len(matched):
            diff = (matched["estimate"] - matched["value"]).abs()
            head.append(f"{len(matched)} cells have a paper value; median |ours − paper| = {diff.median():.3f}, "
                        f"largest = {diff.max():.3f}.\n")
    else:
        head.append("This run is not the paper's study, so there is no paper column (set "
                    "`analysis.paper_comparison: true` only for the paper config). Ours: `*` p < 0.05, `**` p < 0.01 "
                    "by the Mantel permutation test; CI: bootstrap over encoders.\n")
    frame = ours[columns].copy()
    frame["statistic"] = frame["statistic"].map(STAT_LABELS)
    return "\n".join(head) + "\n" + stats.to_markdown(frame)


def parse_markdown_table(text: str) -> pd.DataFrame:
    """The first pipe table of a Markdown text as a frame of strings (for tests and downstream use)."""
    lines = [line.strip() for line in text.splitlines() if line.strip().startswith("|")]
    if len(lines) < 2:
        raise ValueError("no Markdown table found")
    split = lambda line: [c.strip() for c in line.strip("|").split("|")]  # noqa: E731
    header = split(lines[0])
    rows = [split(line) for line in lines[2:]]
    if any(len(r) != len(header) for r in rows):
        raise ValueError("ragged Markdown table")
    return pd.DataFrame(rows, columns=header)


# ----------------------------------------------------------------------------------------------
# Training dynamics (families with a step axis)


def training_dynamics(d_aff: pd.DataFrame, members: Sequence[Mapping[str, object]]) -> pd.DataFrame:
    """d_aff between the checkpoints of a family, one row per checkpoint (``members``: records with
    ``encoder``, ``line`` (e.g. ``seed=0``) and ``step``, from
    :func:`affine_homotopy.study.families.training_dynamics_members`).

    Columns: ``to_final`` = d_aff(checkpoint → its line's final checkpoint, the largest step);
    ``to_other_finals_median`` = median d_aff(checkpoint → the final checkpoint of each other line);
    ``across_median`` / ``across_min`` / ``across_max`` = d_aff(checkpoint → each other line's
    checkpoint at the same step). Rows follow ``members``; NaN where a line has no counterpart.
    """
    frame = pd.DataFrame(list(members), columns=["encoder", "line", "step"])
    frame["final"] = frame["line"].map(frame.loc[frame.groupby("line")["step"].idxmax()].set_index("line")["encoder"])
    position = {name: k for k, name in enumerate(d_aff.index)}
    values = d_aff.to_numpy(dtype=float)
    rows = frame["encoder"].map(position).to_numpy()
    frame["to_final"] = values[rows, frame["final"].map(position).to_numpy()]
    finals = frame.drop_duplicates("line")[["line", "final"]]
    other_finals, across = [], []
    for k, (line, step) in enumerate(zip(frame["line"], frame["step"])):
        columns = finals.loc[finals["line"] != line, "final"].map(position).to_numpy()
        other_finals.append(values[rows[k], columns])
        peers = frame.loc[(frame["line"] != line) & (frame["step"] == step), "encoder"].map(position).to_numpy()
        across.append(values[rows[k], peers])
    summary = lambda arrays, f: [float(f(a)) if a.size else np.nan for a in arrays]  # noqa: E731
    frame["to_other_finals_median"] = summary(other_finals, np.median)
    frame["across_median"] = summary(across, np.median)
    frame["across_min"] = summary(across, np.min)
    frame["across_max"] = summary(across, np.max)
    return frame

