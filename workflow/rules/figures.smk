# Stage 6: figures (PNG for reading, PDF for papers). They read matrices only: regenerating a
# figure never recomputes embeddings or distances.


rule figure_asymmetry_grid:
    input:
        matrix_files("intrinsic", "d_aff"),
    output:
        png=report(
            f"{RESULTS}/figures/asymmetry_grid.png",
            caption="../report/asymmetry_grid.rst",
            category="Figures",
        ),
        pdf=f"{RESULTS}/figures/asymmetry_grid.pdf",
    params:
        tasks=TASKS,
        layers=LAYERS,
        run=RUN,
    log:
        f"{RESULTS}/logs/figures/asymmetry_grid.log",
    conda:
        "../../envs/plot.yaml"
    script:
        "../scripts/figure_asymmetry_grid.py"


rule figure_extrinsic_vs_intrinsic:
    input:
        intrinsic=matrix_files("intrinsic", "d_aff"),
        extrinsic=matrix_files("extrinsic", "d_psi"),
    output:
        png=report(
            f"{RESULTS}/figures/extrinsic_vs_intrinsic.png",
            caption="../report/extrinsic_vs_intrinsic.rst",
            category="Figures",
        ),
        pdf=f"{RESULTS}/figures/extrinsic_vs_intrinsic.pdf",
    params:
        tasks=TASKS,
        layers=LAYERS,
        group=config["analysis"]["encoder_group"],
        run=RUN,
    log:
        f"{RESULTS}/logs/figures/extrinsic_vs_intrinsic.log",
    conda:
        "../../envs/plot.yaml"
    script:
        "../scripts/figure_extrinsic_vs_intrinsic.py"
