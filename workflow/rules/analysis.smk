# Stage 5: how well intrinsic distances predict extrinsic ones.


rule correlate:
    input:
        intrinsic=matrix_files("intrinsic", "d_aff"),
        extrinsic=matrix_files("extrinsic", "d_psi"),
    output:
        csv=report(
            f"{RESULTS}/tables/correlation.csv",
            caption="../report/correlation.rst",
            category="Tables",
        ),
        markdown=f"{RESULTS}/tables/correlation.md",
    params:
        task_layers=[(t, l) for t in TASKS for l in LAYERS],
        group=config["analysis"]["encoder_group"],
    log:
        f"{RESULTS}/logs/correlate.log",
    conda:
        "../../envs/plot.yaml"
    script:
        "../scripts/correlate.py"
