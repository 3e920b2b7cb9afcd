# Stage 5: how well intrinsic distances predict extrinsic ones (Table 1 and its comparison with the
# paper), the rank analysis, the intrinsic preorder and Figure 3's rank-deficiency distances.
# Everything here reads matrices (and, for Figure 3 only, embeddings): never the upstream jobs' code.

ANALYSIS = config["analysis"]
GROUP = ANALYSIS["encoder_group"]
TABLE_MEASURES = list(ANALYSIS["intrinsic_measures"])
TABLE_LAYER = LAYERS[-1] if ANALYSIS["table_layer"] is None else ANALYSIS["table_layer"]
RANK_DEFICIENCY = ANALYSIS["rank_deficiency"]
RD_LAYER = LAYERS[-1] if RANK_DEFICIENCY["layer"] is None else RANK_DEFICIENCY["layer"]
RD_GROUP = MODEL_ENCODERS if RANK_DEFICIENCY["group"] is None else list(RANK_DEFICIENCY["group"])
for _key, _layer in (("analysis.table_layer", TABLE_LAYER), ("analysis.rank_deficiency.layer", RD_LAYER)):
    if _layer not in LAYERS:
        raise WorkflowError(
            f"Invalid configuration: config key '{_key}' has value {_layer}, which is not one of the "
            f"configured layers {LAYERS}. Fix: use one of them, or null for the last."
        )
_unknown = [n for n in RD_GROUP if n not in ENCODERS]
if _unknown:
    raise WorkflowError(
        f"Invalid configuration: config key 'analysis.rank_deficiency.group' names unknown encoder(s) "
        f"{_unknown}; known encoders: {', '.join(ENCODERS)}."
    )
STATS_SETTINGS = {k: ANALYSIS[k] for k in ("n_permutations", "n_bootstrap", "seed", "ci_level")}


rule correlate:
    input:
        intrinsic=[
            f"{RESULTS}/intrinsic/{t}/layer{l}/{m}.csv"
            for t in TASKS
            for l in LAYERS
            for m in TABLE_MEASURES
        ],
        extrinsic=[
            f"{RESULTS}/extrinsic/{t}/layer{l}/{m}.csv"
            for t in TASKS
            for l in LAYERS
            for m in EXTRINSIC_MEASURES
        ],
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
    params:
        tasks=TASKS,
        layers=LAYERS,
        intrinsic=TABLE_MEASURES,
        extrinsic=EXTRINSIC_MEASURES,
        intrinsic_keys=[(t, l, m) for t in TASKS for l in LAYERS for m in TABLE_MEASURES],
        extrinsic_keys=[(t, l, m) for t in TASKS for l in LAYERS for m in EXTRINSIC_MEASURES],
        group=GROUP,
        settings=STATS_SETTINGS,
        table_layer=TABLE_LAYER,
        run_name=RUN,
    log:
        f"{RESULTS}/logs/correlate.log",
    conda:
        "../../envs/plot.yaml"
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
    params:
        with_paper=ANALYSIS["paper_comparison"],
        table_layer=TABLE_LAYER,
        run_name=RUN,
    log:
        f"{RESULTS}/logs/paper_comparison.log",
    conda:
        "../../envs/plot.yaml"
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
    params:
        tasks=TASKS,
        layers=LAYERS,
        group=GROUP,
        settings=STATS_SETTINGS,
        run_name=RUN,
    log:
        f"{RESULTS}/logs/rank_analysis.log",
    conda:
        "../../envs/plot.yaml"
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
    params:
        tasks=TASKS,
        layers=LAYERS,
        fraction=ANALYSIS["preorder_threshold"],
        run_name=RUN,
    log:
        f"{RESULTS}/logs/preorder.log",
    conda:
        "../../envs/plot.yaml"
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
    params:
        encoders=RD_GROUP,
        levels=RANK_DEFICIENCY["levels"],
        layer=RD_LAYER,
        settings=RANK_DEFICIENCY,
        multiplier=config["intrinsic"]["rank_tolerance_multiplier"],
        device=config["device"],
        run_name=RUN,
    resources:
        gpu=PAIRWISE_GPU,
    log:
        f"{RESULTS}/logs/rank_deficiency/{{task}}.log",
    conda:
        "../../envs/compute.yaml"
    script:
        "../scripts/rank_deficiency.py"
