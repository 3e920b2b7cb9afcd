"""The intrinsic preorder per (task, layer): edges, its transitive reduction (figure) and a ranking."""

import pandas as pd

from affine_homotopy.report.analysis import preorder
from affine_homotopy.jobs.io import read_matrix, write_csv
from affine_homotopy.report.plotting import preorder_graphs, save_figure
from affine_homotopy.jobs.runner import keyed_inputs, run
from affine_homotopy.core.stats import median_summary


def main(snakemake):
    p = snakemake.params
    d_aff_paths = keyed_inputs(p.d_aff, snakemake.input.d_aff)  # {(task, layer): path}
    rank_paths = keyed_inputs(p.ranks, snakemake.input.ranks)
    graphs, ranks, edges, ranking = {}, {}, [], []
    for key, d_aff_path in d_aff_paths.items():
        rank_path = rank_paths[key]
        d_aff = read_matrix(d_aff_path)
        graph = preorder(d_aff, p.fraction)
        graphs[key] = graph
        ranks[key] = pd.read_csv(rank_path).set_index("encoder")["rank"]
        classes = graph["classes"]
        reduced = {(a, b) for a, b in graph["edges"]}
        for i, source in enumerate(d_aff.index):
            for j, target in enumerate(d_aff.columns):
                if graph["relation"][i, j]:
                    ci = next(k for k, c in enumerate(classes) if source in c)
                    cj = next(k for k, c in enumerate(classes) if target in c)
                    edges.append({"task": key[0], "layer": key[1], "mapped_from": source, "mapped_to": target,
                                  "d_aff": d_aff.iloc[i, j], "threshold": graph["threshold"],
                                  "in_reduction": (ci, cj) in reduced and classes[ci][0] == source
                                  and classes[cj][0] == target})
        summary = median_summary(d_aff).sort_values("to_median", kind="stable")
        summary.insert(0, "position", range(1, len(summary) + 1))
        ranking.append(summary.assign(task=key[0], layer=key[1], rank=[ranks[key][e] for e in summary["encoder"]]))
    # keep the header when no pair passes the threshold, so the file still parses
    columns = ["task", "layer", "mapped_from", "mapped_to", "d_aff", "threshold", "in_reduction"]
    write_csv(snakemake.output.edges, pd.DataFrame(edges, columns=columns))
    ranking = pd.concat(ranking, ignore_index=True)
    write_csv(snakemake.output.ranking, ranking[["task", "layer", "position", "encoder", "to_median", "from_median",
                                                 "rank"]])
    fig = preorder_graphs(graphs, ranks, p.tasks, p.layers,
                          f"Intrinsic preorder: arrow i → j when d_aff(i → j) ≤ {p.fraction} × median (run {p.run_name})")
    save_figure(fig, snakemake.output.png, snakemake.output.pdf)


run(snakemake, main)
