# Stage 5: how well intrinsic distances predict extrinsic ones (Table 1 and its comparison with the
# paper), the rank analysis, the intrinsic preorder and Figure 3's rank-deficiency distances.
# Everything here reads matrices (and, for Figure 3 only, embeddings): never the upstream jobs' code.

ANALYSIS = config["analysis"]
GROUP = ANALYSIS["encoder_group"]
TABLE_MEASURES = list(ANALYSIS["intrinsic_measures"])
# Any position the `layers` key can hold (12, last, 0.5) or its label, one of EXTRINSIC_LAYERS (null: the
# last of them); check_config has checked it (affine_homotopy.study.validation.table_layer).
TABLE_LAYER = table_layer(config)
RANK_DEFICIENCY = ANALYSIS["rank_deficiency"]
RD_LAYER = configured_label("analysis.rank_deficiency.layer", RANK_DEFICIENCY["layer"], LAYER_POSITIONS)
RD_GROUP = RANK_DEFICIENCY_GROUP  # checked by check_config (startup.smk)
STATS_SETTINGS = {k: ANALYSIS[k] for k in ("n_permutations", "n_bootstrap", "seed", "ci_level")}


# Table 1's matrices: {(task, layer, measure): path}, at the layers where both stages run (EXTRINSIC_LAYERS)
TABLE1_INTRINSIC = keyed(
    f"{RESULTS}/intrinsic/{{task}}/{{layer}}/{{measure}}.csv",
    task=TASKS,
    layer=EXTRINSIC_LAYERS,
    measure=TABLE_MEASURES,
)
TABLE1_EXTRINSIC = keyed(
    f"{RESULTS}/extrinsic/{{task}}/{{layer}}/{{measure}}.csv",
    task=TASKS,
    layer=EXTRINSIC_LAYERS,
    measure=EXTRINSIC_MEASURES,
)


rule correlate:
    input:
        intrinsic=list(TABLE1_INTRINSIC.values()),
        extrinsic=list(TABLE1_EXTRINSIC.values()),
    output:
        csv=report(
            f"{RESULTS}/tables/correlation.csv",
            caption="../report/correlation.rst",
            category="Tables",
            subcategory="Table 1",
        ),
        markdown=report(
            f"{RESULTS}/tables/correlation.md",
            caption="../report/correlation_md.rst",
            category="Tables",
            subcategory="Table 1",
        ),
        latex=report(
            f"{RESULTS}/tables/correlation.tex",
            caption="../report/correlation_tex.rst",
            category="Tables",
            subcategory="Table 1",
        ),
    log:
        job_log("correlate"),
    benchmark:
        job_benchmark("correlate")
    conda:
        "../envs/plot.yaml"
    resources:
        mem_mb=fixed_resource("table", "mem_mb"),
        runtime=fixed_resource("table", "runtime"),
    params:
        tasks=TASKS,
        layers=EXTRINSIC_LAYERS,
        intrinsic=TABLE_MEASURES,
        extrinsic=EXTRINSIC_MEASURES,
        intrinsic_paths=TABLE1_INTRINSIC,
        extrinsic_paths=TABLE1_EXTRINSIC,
        group=GROUP,
        settings=STATS_SETTINGS,
        table_layer=TABLE_LAYER,
        run_name=RUN,
    script:
        "../scripts/correlate.py"


rule paper_comparison:
    input:
        table=f"{RESULTS}/tables/correlation.csv",
        paper=workflow.source_path("../../config/paper_results.csv"),
    output:
        report(
            f"{RESULTS}/paper_comparison.md",
            caption="../report/paper_comparison.rst",
            category="Tables",
            subcategory="Comparison with the paper",
        ),
    log:
        job_log("paper_comparison"),
    benchmark:
        job_benchmark("paper_comparison")
    conda:
        "../envs/plot.yaml"
    resources:
        mem_mb=fixed_resource("marker", "mem_mb"),
        runtime=fixed_resource("marker", "runtime"),
    params:
        with_paper=ANALYSIS["paper_comparison"],
        table_layer=TABLE_LAYER,
        run_name=RUN,
    script:
        "../scripts/paper_comparison.py"


rule rank_analysis:
    input:
        ranks=matrix_files("intrinsic", "rank"),
        d_aff=matrix_files("intrinsic", "d_aff"),
    output:
        encoders=report(
            f"{RESULTS}/tables/encoder_ranks.csv",
            caption="../report/encoder_ranks.rst",
            category="Tables",
            subcategory="Rank analysis",
        ),
        correlations=report(
            f"{RESULTS}/tables/rank_analysis.csv",
            caption="../report/rank_analysis.rst",
            category="Tables",
            subcategory="Rank analysis",
        ),
        png=report(
            f"{RESULTS}/figures/rank_vs_distance.png",
            caption="../report/rank_vs_distance.rst",
            category="Figures",
            subcategory="Rank analysis",
        ),
        pdf=f"{RESULTS}/figures/rank_vs_distance.pdf",
    log:
        job_log("rank_analysis"),
    benchmark:
        job_benchmark("rank_analysis")
    conda:
        "../envs/plot.yaml"
    resources:
        mem_mb=fixed_resource("table", "mem_mb"),
        runtime=fixed_resource("table", "runtime"),
    params:
        tasks=TASKS,
        layers=LAYERS,
        ranks=matrix_paths("intrinsic", "rank"),
        d_aff=matrix_paths("intrinsic", "d_aff"),
        group=GROUP,
        settings=STATS_SETTINGS,
        run_name=RUN,
    script:
        "../scripts/rank_analysis.py"


rule preorder:
    input:
        d_aff=matrix_files("intrinsic", "d_aff"),
        ranks=matrix_files("intrinsic", "rank"),
    output:
        edges=report(
            f"{RESULTS}/tables/preorder_edges.csv",
            caption="../report/preorder_edges.rst",
            category="Tables",
            subcategory="Intrinsic preorder",
        ),
        ranking=report(
            f"{RESULTS}/tables/preorder_ranking.csv",
            caption="../report/preorder_ranking.rst",
            category="Tables",
            subcategory="Intrinsic preorder",
        ),
        png=report(
            f"{RESULTS}/figures/preorder.png",
            caption="../report/preorder.rst",
            category="Figures",
            subcategory="Intrinsic preorder",
        ),
        pdf=f"{RESULTS}/figures/preorder.pdf",
    log:
        job_log("preorder"),
    benchmark:
        job_benchmark("preorder")
    conda:
        "../envs/plot.yaml"
    resources:
        mem_mb=fixed_resource("table", "mem_mb"),
        runtime=fixed_resource("table", "runtime"),
    params:
        tasks=TASKS,
        layers=LAYERS,
        d_aff=matrix_paths("intrinsic", "d_aff"),
        ranks=matrix_paths("intrinsic", "rank"),
        fraction=ANALYSIS["preorder_threshold"],
        run_name=RUN,
    script:
        "../scripts/preorder.py"


rule rank_deficiency:
    input:
        rank_deficiency_embeddings,
    output:
        report(
            f"{RESULTS}/rank_deficiency/{{task}}.csv",
            caption="../report/rank_deficiency_table.rst",
            category="Tables",
            subcategory="Rank deficiency (Figure 3)",
        ),
    log:
        job_log("rank_deficiency/{task}"),
    benchmark:
        job_benchmark("rank_deficiency/{task}")
    conda:
        "../envs/compute.yaml"
    threads: config["intrinsic"]["threads"]  # the d_aff solver, as in the intrinsic jobs
    resources:
        gpu=GPU_REQUEST,
        mem_mb=rank_deficiency_resource("mem_mb"),
        runtime=rank_deficiency_resource("runtime"),
        disk_mb=10,
    params:
        embeddings=lambda wildcards: {e: embeddings(e, wildcards.task, "train") for e in RD_GROUP},
        levels=RANK_DEFICIENCY["levels"],
        layer=RD_LAYER,
        settings=RANK_DEFICIENCY,
        study={"intrinsic": INTRINSIC_SETTINGS},
        device=config["device"],
        run_name=RUN,
    script:
        "../scripts/rank_deficiency.py"
