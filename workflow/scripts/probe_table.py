"""Collect the probe metrics of every encoder for one (task, layer): one row per encoder."""

import pandas as pd

from affine_homotopy.jobs.io import write_csv
from affine_homotopy.jobs.runner import run


def main(snakemake):
    layer = snakemake.wildcards.layer  # position label, e.g. layer6
    frames = [pd.read_csv(path) for path in snakemake.input]
    table = pd.concat([f[f["layer"] == layer] for f in frames], ignore_index=True)
    write_csv(snakemake.output[0], table)


run(snakemake, main)
