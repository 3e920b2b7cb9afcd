# Affine homotopy between language encoders: the study as a Snakemake workflow.
# Default config: the offline demo. The paper's study: --configfile config/config.yaml
from snakemake.utils import min_version

min_version("9.0")


# The demo is the default config; a --configfile given on the command line replaces it (instead
# of being merged into it, which would mix two studies).
if not workflow.overwrite_configfiles:

    configfile: f"{workflow.basedir}/config/demo.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/download.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/embed.smk"
include: "workflow/rules/intrinsic.smk"
include: "workflow/rules/extrinsic.smk"
include: "workflow/rules/analysis.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/provenance.smk"


rule all:
    input:
        all_targets(),
    default_target: True
