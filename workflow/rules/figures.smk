# Stage 6: figures (PNG for reading, PDF for papers). They read matrices and tables only:
# regenerating a figure (--forcerun figure_...) never recomputes embeddings or distances.


# Figure 2's matrices at the table layer: {task: path} and {(task, measure): path}
FIGURE2_D_AFF = keyed(f"{RESULTS}/intrinsic/{{task}}/{TABLE_LAYER}/d_aff.csv", task=TASKS)
FIGURE2_EXTRINSIC = keyed(
    f"{RESULTS}/extrinsic/{{task}}/{TABLE_LAYER}/{{measure}}.csv", task=TASKS, measure=EXTRINSIC_MEASURES
)


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
        job_log("figures/asymmetry_grid"),
    benchmark:
        job_benchmark("figures/asymmetry_grid")
    conda:
        "../envs/plot.yaml"
    resources:
        mem_mb=fixed_resource("table", "mem_mb"),
        runtime=fixed_resource("table", "runtime"),
    params:
        tasks=TASKS,
        layers=LAYERS,
        d_aff=matrix_paths("intrinsic", "d_aff"),
        run_name=RUN,
    script:
        "../scripts/figure_asymmetry_grid.py"


rule figure_extrinsic_vs_intrinsic:
    input:
        intrinsic=list(FIGURE2_D_AFF.values()),
        extrinsic=list(FIGURE2_EXTRINSIC.values()),
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
        job_log("figures/extrinsic_vs_intrinsic"),
    benchmark:
        job_benchmark("figures/extrinsic_vs_intrinsic")
    conda:
        "../envs/plot.yaml"
    resources:
        mem_mb=fixed_resource("table", "mem_mb"),
        runtime=fixed_resource("table", "runtime"),
    params:
        tasks=TASKS,
        extrinsic=EXTRINSIC_MEASURES,
        intrinsic_paths=FIGURE2_D_AFF,
        extrinsic_paths=FIGURE2_EXTRINSIC,
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
        job_log("figures/layer_trend"),
    benchmark:
        job_benchmark("figures/layer_trend")
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
        list(keyed(f"{RESULTS}/rank_deficiency/{{task}}.csv", task=TASKS).values()),
    output:
        png=report(
            f"{RESULTS}/figures/rank_deficiency.png",
            caption="../report/rank_deficiency.rst",
            category="Figures",
            subcategory="Rank deficiency (Figure 3)",
        ),
        pdf=f"{RESULTS}/figures/rank_deficiency.pdf",
    log:
        job_log("figures/rank_deficiency"),
    benchmark:
        job_benchmark("figures/rank_deficiency")
    conda:
        "../envs/plot.yaml"
    resources:
        mem_mb=fixed_resource("table", "mem_mb"),
        runtime=fixed_resource("table", "runtime"),
    params:
        tasks=TASKS,
        paths=keyed(f"{RESULTS}/rank_deficiency/{{task}}.csv", task=TASKS),
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
            job_log("figures/training_dynamics"),
        benchmark:
            job_benchmark("figures/training_dynamics")
        conda:
            "../envs/plot.yaml"
        params:
            tasks=TASKS,
            layers=LAYERS,
            d_aff=matrix_paths("intrinsic", "d_aff"),
            families=DYNAMICS_FAMILIES,
            run_name=RUN,
        script:
            "../scripts/figure_training_dynamics.py"
