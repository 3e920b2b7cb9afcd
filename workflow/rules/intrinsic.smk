# Stage 3: intrinsic distances, one job per (task, layer) over all ordered encoder pairs: the
# certified affine distance, its least-squares and linear/isometric variants, and the baselines.

# (the measures of INTRINSIC_MEASURES, common.smk: intrinsic.measures, from the registry affine_homotopy.core.measures)


rule intrinsic:
    input:
        all_train_embeddings,
    output:
        **{m: f"{RESULTS}/intrinsic/{{task}}/{{layer}}/{m}.csv" for m in INTRINSIC_MEASURES},
        rank=f"{RESULTS}/intrinsic/{{task}}/{{layer}}/rank.csv",
        solver=f"{RESULTS}/intrinsic/{{task}}/{{layer}}/d_aff_solver.csv",
        weights=f"{RESULTS}/intrinsic/{{task}}/{{layer}}/d_aff_weights.npy",
    log:
        job_log("intrinsic/{task}_{layer}"),
    benchmark:
        job_benchmark("intrinsic/{task}_{layer}")
    # before the probes: each extrinsic job waits for its layer's intrinsic job, and ready intrinsic
    # jobs left behind the probes would make the run end on one extrinsic job beside an idle core
    priority: 1
    conda:
        "../envs/compute.yaml"
    threads: config["intrinsic"]["threads"]
    resources:
        gpu=GPU_REQUEST,
        mem_mb=pairwise_resource("mem_mb"),
        runtime=pairwise_resource("runtime", "intrinsic"),
        disk_mb=pairwise_resource("disk_mb"),
    params:
        encoders=ENCODERS,
        measures=INTRINSIC_MEASURES,
        study={"intrinsic": INTRINSIC_SETTINGS},
        device=config["device"],
    script:
        "../scripts/intrinsic.py"
