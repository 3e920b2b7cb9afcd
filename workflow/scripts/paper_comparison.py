"""paper_comparison.md: our Table 1 beside the paper's (paper config only) and the differences."""

import pandas as pd

from affine_homotopy.report.analysis import paper_comparison
from affine_homotopy.jobs.io import write_text
from affine_homotopy.jobs.runner import run


def main(snakemake):
    p = snakemake.params
    table = pd.read_csv(snakemake.input.table)
    paper = pd.read_csv(snakemake.input.paper, comment="#") if p.with_paper else None
    source = "Table 1 of Chan et al. (NeurIPS 2024), transcribed in `config/paper_results.csv`"
    write_text(snakemake.output[0], paper_comparison(table, p.table_layer, p.run_name, paper, source))


run(snakemake, main)
