# Stage 6: figures (PNG for reading, PDF for papers). They read matrices and tables only:
# regenerating a figure (--forcerun figure_...) never recomputes embeddings or distances.


rule figure_asymmetry_grid:
    input:
        matrix_files("intrinsic", "d_aff"),
    output:
        png=report(
            f"{RESULTS}/figures/asymmetry_grid.png",
            caption="../report/asymmetry_grid.rst",
            category="Figures",
            subcategory="Figures 1/4: asymmetry",
        ),
        pdf=f"{RESULTS}/figures/asymmetry_grid.pdf",
    log:
        f"{RESULTS}/logs/figures/asymmetry_grid.log",
    conda:
        "../envs/plot.yaml"
    resources:
        mem_mb=fixed_resource("table", "mem_mb"),
        runtime=fixed_resource("table", "runtime"),
    params:
        tasks=TASKS,
        layers=LAYERS,
        run_name=RUN,
    script:
        "../scripts/figure_asymmetry_grid.py"


rule figure_extrinsic_vs_intrinsic:
    input:
        intrinsic=[f"{RESULTS}/intrinsic/{t}/{TABLE_LAYER}/d_aff.csv" for t in TASKS],
        extrinsic=[f"{RESULTS}/extrinsic/{t}/{TABLE_LAYER}/{m}.csv" for t in TASKS for m in EXTRINSIC_MEASURES],
    output:
        png=report(
            f"{RESULTS}/figures/extrinsic_vs_intrinsic.png",
            caption="../report/extrinsic_vs_intrinsic.rst",
            category="Figures",
            subcategory="Figure 2: extrinsic vs intrinsic",
        ),
        pdf=f"{RESULTS}/figures/extrinsic_vs_intrinsic.pdf",
        fits=report(
            f"{RESULTS}/tables/figure2_fits.csv",
            caption="../report/figure2_fits.rst",
            category="Tables",
            subcategory="Figure 2: extrinsic vs intrinsic",
        ),
    log:
        f"{RESULTS}/logs/figures/extrinsic_vs_intrinsic.log",
    conda:
        "../envs/plot.yaml"
    resources:
        mem_mb=fixed_resource("table", "mem_mb"),
        runtime=fixed_resource("table", "runtime"),
    params:
        tasks=TASKS,
        extrinsic=EXTRINSIC_MEASURES,
        layer=TABLE_LAYER,
        group=GROUP,
        settings=STATS_SETTINGS,
        run_name=RUN,
    script:
        "../scripts/figure_extrinsic_vs_intrinsic.py"


rule figure_layer_trend:
    input:
        f"{RESULTS}/tables/correlation.csv",
    output:
        png=report(
            f"{RESULTS}/figures/layer_trend.png",
            caption="../report/layer_trend.rst",
            category="Figures",
            subcategory="Layer trend",
        ),
        pdf=f"{RESULTS}/figures/layer_trend.pdf",
    log:
        f"{RESULTS}/logs/figures/layer_trend.log",
    conda:
        "../envs/plot.yaml"
    resources:
        mem_mb=fixed_resource("table", "mem_mb"),
        runtime=fixed_resource("table", "runtime"),
    params:
        tasks=TASKS,
        extrinsic=EXTRINSIC_MEASURES,
        run_name=RUN,
    script:
        "../scripts/figure_layer_trend.py"


rule figure_rank_deficiency:
    input:
        [f"{RESULTS}/rank_deficiency/{t}.csv" for t in TASKS],
    output:
        png=report(
            f"{RESULTS}/figures/rank_deficiency.png",
            caption="../report/rank_deficiency.rst",
            category="Figures",
            subcategory="Rank deficiency (Figure 3)",
        ),
        pdf=f"{RESULTS}/figures/rank_deficiency.pdf",
    log:
        f"{RESULTS}/logs/figures/rank_deficiency.log",
    conda:
        "../envs/plot.yaml"
    resources:
        mem_mb=fixed_resource("table", "mem_mb"),
        runtime=fixed_resource("table", "runtime"),
    params:
        tasks=TASKS,
        layer=RD_LAYER,
        run_name=RUN,
    script:
        "../scripts/figure_rank_deficiency.py"


if DYNAMICS_FAMILIES:

    rule figure_training_dynamics:
        input:
            matrix_files("intrinsic", "d_aff"),
        output:
            png=report(
                f"{RESULTS}/figures/training_dynamics.png",
                caption="../report/training_dynamics.rst",
                category="Figures",
                subcategory="Training dynamics",
            ),
            pdf=f"{RESULTS}/figures/training_dynamics.pdf",
            table=report(
                f"{RESULTS}/tables/training_dynamics.csv",
                caption="../report/training_dynamics.rst",
                category="Tables",
                subcategory="Training dynamics",
            ),
        log:
            f"{RESULTS}/logs/figures/training_dynamics.log",
        conda:
            "../envs/plot.yaml"
        params:
            tasks=TASKS,
            layers=LAYERS,
            families=DYNAMICS_FAMILIES,
            run_name=RUN,
        script:
            "../scripts/figure_training_dynamics.py"
