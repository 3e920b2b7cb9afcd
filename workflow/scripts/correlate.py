"""Table 1: correlations of every intrinsic with every extrinsic measure, per (task, layer).

Writes the long CSV (classical p, Mantel permutation p, bootstrap CI over encoders), the Markdown
tables in the paper's layout (one per layer, the table layer first) and the LaTeX Table 1.
"""

import logging

from affine_homotopy.report.analysis import correlation_table, table_latex, table_markdown
from affine_homotopy.jobs.io import read_matrix, write_csv, write_text
from affine_homotopy.jobs.runner import keyed_inputs, run

log = logging.getLogger("affine_homotopy.job")


def main(snakemake):
    p = snakemake.params
    # {(task, layer, measure): path}
    paths = keyed_inputs(p.intrinsic_paths, snakemake.input.intrinsic) | keyed_inputs(p.extrinsic_paths, snakemake.input.extrinsic)
    load = lambda task, layer, measure: read_matrix(paths[(task, layer, measure)])  # noqa: E731
    s = p.settings
    table = correlation_table(p.tasks, p.layers, p.intrinsic, p.extrinsic, load, load, p.group, s["n_permutations"],
                              s["n_bootstrap"], s["seed"], s["ci_level"], progress=log.info)
    write_csv(snakemake.output.csv, table)
    group_note = "all encoders" if p.group is None else f"encoder group of {len(p.group)}: {', '.join(p.group)}"
    write_text(snakemake.output.markdown, table_markdown(table, p.layers, p.table_layer, p.run_name, group_note))
    write_text(snakemake.output.latex, table_latex(table, p.table_layer, p.run_name))


run(snakemake, main)
