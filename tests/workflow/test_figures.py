"""Analysis helpers and figures on small constructed matrices (no workflow run)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from affine_homotopy.core.intrinsic import IntrinsicSettings
from affine_homotopy.report import analysis, plotting

from tests.helpers import REPO, assert_figure_drawn


def frame(values: np.ndarray, names: list[str]) -> pd.DataFrame:
    out = pd.DataFrame(values, index=names, columns=names)
    out.index.name = "mapped_from"
    return out


@pytest.fixture
def chain() -> tuple[list[str], pd.DataFrame, pd.Series]:
    """e0 (full) maps onto e1 (truncated), e1 onto e2 (more truncated); e3 = e0 up to an affine map."""
    names = ["enc_full", "enc_t80", "enc_t40", "enc_aff"]
    d = np.array([[0.0, 0.0, 0.0, 0.0],
                  [1.0, 0.0, 0.0, 1.0],
                  [2.0, 1.5, 0.0, 2.0],
                  [0.0, 0.0, 0.0, 0.0]])
    return names, frame(d, names), pd.Series([100, 80, 40, 100], index=names)


def test_preorder_reduction_drops_implied_edges(chain) -> None:
    names, d_aff, _ = chain
    graph = analysis.preorder(d_aff, fraction=0.1)
    classes = graph["classes"]
    assert sorted(map(sorted, classes)) == [["enc_aff", "enc_full"], ["enc_t40"], ["enc_t80"]]
    index = {c[0]: k for k, c in enumerate(classes)}
    full, t80, t40 = (index[n] for n in ("enc_full", "enc_t80", "enc_t40"))
    assert set(graph["edges"]) == {(full, t80), (t80, t40)}  # full -> t40 is implied: not drawn


def test_rank_analysis_direction(chain) -> None:
    _, d_aff, rank = chain
    per_encoder, records = analysis.rank_analysis(rank.rename("rank").reset_index().rename(columns={"index": "encoder"}),
                                                  d_aff)
    by = {r["direction"]: r for r in records}
    assert by["from"]["spearman_rho"] < 0  # higher rank maps onto others more easily
    assert list(per_encoder["encoder"]) == list(d_aff.index)


def test_short_labels_are_short_and_unique() -> None:
    assert plotting.short_labels(["minilm", "minilm_svd80", "minilm_svd20"]) == ["minilm", "svd80", "svd20"]
    labels = plotting.short_labels([f"multibert_{k:02d}" for k in range(25)] + ["electra", "roberta"])
    assert labels[:2] == ["M00", "M01"] and labels[-1] == "roberta" and len(set(labels)) == 27


def test_paper_comparison_parses_with_and_without_the_paper(tmp_path: Path) -> None:
    rows = []
    for stat, value in (("spearman", 0.5), ("pearson", 0.7)):
        rows.append({"task": "mrpc", "layer": 12, "intrinsic": "d_aff", "extrinsic": "d_psi", "statistic": stat,
                     "estimate": value, "p_permutation": 0.001, "p_classical": 1e-9, "ci_low": 0.1, "ci_high": 0.8})
    table = pd.DataFrame(rows)
    paper = pd.read_csv(REPO / "config" / "paper_results.csv", comment="#")
    text = analysis.paper_comparison(table, 12, "paper", paper, "Table 1")
    parsed = analysis.parse_markdown_table(text)
    assert list(parsed["paper"]) == ["0.309*", "0.707*"]
    assert list(parsed["ours − paper"]) == ["0.191", "-0.007"]
    plain = analysis.parse_markdown_table(analysis.paper_comparison(table, 12, "demo", None))
    assert "paper" not in plain.columns and list(plain["ours"]) == ["0.500**", "0.700**"]


@pytest.mark.slow  # every figure drawn and saved: over 10 s
def test_every_figure_function_draws(tmp_path: Path, chain) -> None:
    names, d_aff, rank = chain
    rng = np.random.default_rng(0)
    tasks, layers = ["t1", "t2"], [1, 2]
    mats = {(t, l): d_aff + frame(np.abs(rng.normal(0, 0.1, (4, 4))) * (1 - np.eye(4)), names) for t in tasks for l in layers}
    figs = {"grid": plotting.asymmetry_grid(mats, tasks, layers, "grid")}
    pairs = {(t, "d_psi"): (mats[(t, 2)], mats[(t, 1)] * 0.3) for t in tasks}
    fits = pd.DataFrame([{"task": t, "extrinsic": "d_psi", **analysis.regression_fit(*pairs[(t, "d_psi")])} for t in tasks])
    figs["fig2"] = plotting.extrinsic_vs_intrinsic(pairs, fits, tasks, ["d_psi"], None, "fig2")
    load = lambda t, l, m: mats[(t, l)] if m != "cka" else mats[(t, l)].T  # noqa: E731
    table = analysis.correlation_table(tasks, layers, ["d_aff", "cka"], ["d_psi"], load, load, n_bootstrap=100)
    figs["trend"] = plotting.layer_trend(table, tasks, ["d_psi"], "trend")
    ranks = rank.rename("rank").rename_axis("encoder").reset_index()
    per, cors = [], []
    for t in tasks:
        for l in layers:
            p, r = analysis.rank_analysis(ranks, mats[(t, l)])
            per.append(p.assign(task=t, layer=l))
            cors += [{"task": t, "layer": l, **x} for x in r]
    figs["rank"] = plotting.rank_vs_distance(pd.concat(per), pd.DataFrame(cors), tasks, layers, "rank")
    graphs = {k: analysis.preorder(m, 0.2) for k, m in mats.items()}
    figs["preorder"] = plotting.preorder_graphs(graphs, {k: rank for k in mats}, tasks, layers, "preorder")
    levels = [0.5, 1.0]
    rd = pd.DataFrame([{"level_from": a, "level_to": b, "rank_from": 10 * a, "rank_to": 10 * b, "median": max(a - b, 0),
                        "q1": 0, "q3": 1, "n_pairs": 2} for a in levels for b in levels])
    figs["rd"] = plotting.rank_deficiency_grids({t: rd for t in tasks}, tasks, "rd")
    for name, fig in figs.items():
        inches = tuple(fig.get_size_inches())
        plotting.save_figure(fig, tmp_path / f"{name}.png", tmp_path / f"{name}.pdf")
        assert_figure_drawn(tmp_path / f"{name}.png", tmp_path / f"{name}.pdf", inches, dpi=plotting.STYLE["savefig.dpi"])


def test_the_layer_trend_draws_with_one_layer(tmp_path: Path, chain) -> None:
    """extrinsic.layers of one layer (the paper config: the final one) gives Table 1 at that layer only:
    the layer trend then has one point per line, and still draws its markers, two extrinsic measures."""
    names, d_aff, _ = chain
    load = lambda t, l, m: d_aff if m != "cka" else d_aff.T  # noqa: E731
    table = analysis.correlation_table(["t"], ["layer12"], ["d_aff", "cka"], ["d_psi", "d_worst"], load,
                                       lambda t, l, m: d_aff.T * (2 if m == "d_worst" else 1), n_bootstrap=100)
    assert set(table["layer"]) == {"layer12"}
    fig = plotting.layer_trend(table, ["t"], ["d_psi", "d_worst"], "trend")
    inches = tuple(fig.get_size_inches())
    plotting.save_figure(fig, tmp_path / "trend.png", tmp_path / "trend.pdf")
    assert_figure_drawn(tmp_path / "trend.png", tmp_path / "trend.pdf", inches, dpi=plotting.STYLE["savefig.dpi"])


def test_table_layouts(chain) -> None:
    names, d_aff, _ = chain
    load = lambda t, l, m: d_aff  # noqa: E731
    table = analysis.correlation_table(["t"], [1], ["d_aff"], ["d_psi"], load, lambda t, l, m: d_aff.T,
                                       n_bootstrap=100)
    md = analysis.table_markdown(table, [1], 1, "run", "all encoders")
    parsed = analysis.parse_markdown_table(md)
    assert list(parsed.columns) == ["task", "extrinsic", "stat", "d_aff"] and list(parsed["stat"]) == ["ρ", "r"]
    tex = analysis.table_latex(table, 1, "run")
    assert tex.count(r"\\") >= 3 and r"\begin{tabular}" in tex


def test_rank_deficiency_grid_is_asymmetric() -> None:
    rng = np.random.default_rng(0)
    base = rng.standard_normal((120, 12)) @ rng.standard_normal((12, 12))
    frame_ = analysis.rank_deficiency({"a": base.astype(np.float32)}, [0.5, 1.0],
                                      IntrinsicSettings(tol=1e-2, max_iter=50))
    grid = frame_.pivot(index="level_from", columns="level_to", values="median")
    assert grid.loc[1.0, 0.5] < 1e-3 < grid.loc[0.5, 1.0]  # full rank maps onto its truncation, not back
    assert set(frame_["n_pairs"]) == {1} and frame_.loc[frame_["level_from"] == 0.5, "rank_from"].iloc[0] == 6


def test_the_figure_check_catches_a_blank_or_tiny_picture(tmp_path: Path) -> None:
    import matplotlib.pyplot as plt

    blank = plt.figure(figsize=(3, 2))
    plotting.save_figure(blank, tmp_path / "blank.png", tmp_path / "blank.pdf")
    with pytest.raises(AssertionError, match="distinct colours"):
        assert_figure_drawn(tmp_path / "blank.png", tmp_path / "blank.pdf")
    drawn, axes = plt.subplots(figsize=(3, 2))
    axes.plot(np.sin(np.linspace(0, 9, 200)))
    axes.set_title("a curve")
    plotting.save_figure(drawn, tmp_path / "drawn.png", tmp_path / "drawn.pdf")
    assert plt.rcParams["savefig.dpi"] == "figure"  # saved at the figure's own dpi
    assert_figure_drawn(tmp_path / "drawn.png", tmp_path / "drawn.pdf", (3, 2), dpi=drawn.dpi)
    with pytest.raises(AssertionError, match="width"):  # the size is checked: not the size of a 6-inch figure
        assert_figure_drawn(tmp_path / "drawn.png", None, (6, 2), dpi=drawn.dpi)
