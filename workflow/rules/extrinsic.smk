# Stage 4: task probes (and, with d_worst, its random-label probes) per (encoder, task) for every
# extrinsic layer (EXTRINSIC_LAYERS: extrinsic.layers), their tables, the extrinsic distances that
# extrinsic.measures selects (d_psi; d_worst; d_worst_search) with Lemma 5.2's bounds, and a run summary.


rule probe:
    input:
        train=f"{RESULTS}/embeddings/{{encoder}}/{{task}}/train.npy",
        dev=f"{RESULTS}/embeddings/{{encoder}}/{{task}}/dev.npy",
        train_table=f"{RESULTS}/data/{{task}}/train.parquet",
        dev_table=f"{RESULTS}/data/{{task}}/dev.parquet",
        # the task's classes (a table's or a Hugging Face dataset's come from its data)
        train_meta=f"{RESULTS}/data/{{task}}/train.json",
    output:
        weights=expand(
            f"{RESULTS}/probes/{{{{task}}}}/weights/{{{{encoder}}}}/{{layer}}.npz",
            layer=EXTRINSIC_LAYERS,
        ),
        metrics=f"{RESULTS}/probes/{{task}}/metrics/{{encoder}}.csv",
    log:
        job_log("probe/{encoder}_{task}"),
    benchmark:
        job_benchmark("probe/{encoder}_{task}")
    conda:
        "../envs/compute.yaml"
    resources:
        mem_mb=probe_resource("mem_mb"),
        runtime=probe_resource("runtime"),
    params:
        task_spec=lambda wildcards: config["tasks"][wildcards.task],
        layers=EXTRINSIC_LAYERS,
        settings=config["probe"],
        n_random=N_RANDOM_PROBES,
        random_probes=config["extrinsic"]["random_probes"],
        rank_multiplier=config["intrinsic"]["rank_multiplier"],
    script:
        "../scripts/probe.py"


rule probe_table:
    input:
        expand(f"{RESULTS}/probes/{{{{task}}}}/metrics/{{encoder}}.csv", encoder=ENCODERS),
    output:
        f"{RESULTS}/probes/{{task}}/{{layer}}.csv",
    log:
        job_log("probe_table/{task}_{layer}"),
    benchmark:
        job_benchmark("probe_table/{task}_{layer}")
    conda:
        "../envs/compute.yaml"
    resources:
        mem_mb=fixed_resource("marker", "mem_mb"),
        runtime=fixed_resource("marker", "runtime"),
    params:
        encoders=ENCODERS,
    script:
        "../scripts/probe_table.py"


if EXTRINSIC_PARTS is None:

    rule extrinsic:
        input:
            **EXTRINSIC_JOB_INPUT,
        output:
            **extrinsic_files(f"{RESULTS}/extrinsic/{{task}}/{{layer}}"),
        log:
            job_log("extrinsic/{task}_{layer}"),
        benchmark:
            job_benchmark("extrinsic/{task}_{layer}")
        conda:
            "../envs/compute.yaml"
        # one thread: the certified LPs run on one BLAS thread by design (FixedClassifierSolver), so a
        # second one would mostly idle; two jobs at once use the cores instead
        threads: 1
        resources:
            gpu=EXTRINSIC_GPU_REQUEST,
            mem_mb=pairwise_resource("mem_mb"),
            runtime=pairwise_resource("runtime", "extrinsic"),
            disk_mb=pairwise_resource("disk_mb"),
        params:
            **EXTRINSIC_JOB_PARAMS,
            sources=None,
        script:
            "../scripts/extrinsic.py"

else:
    # extrinsic.sources_per_job: one job per block of consecutive source encoders, then a merge job
    # that writes the files the single job writes

    rule extrinsic_part:
        input:
            **EXTRINSIC_JOB_INPUT,
        output:
            **extrinsic_files(f"{RESULTS}/extrinsic/{{task}}/{{layer}}/parts/{{part}}"),
        log:
            job_log("extrinsic_part/{task}_{layer}_{part}"),
        benchmark:
            job_benchmark("extrinsic_part/{task}_{layer}_{part}")
        wildcard_constraints:
            part=r"\d+",
        conda:
            "../envs/compute.yaml"
        threads: 1  # as the single job's
        resources:
            gpu=EXTRINSIC_GPU_REQUEST,
            mem_mb=pairwise_resource("mem_mb"),
            runtime=extrinsic_part_runtime,
            disk_mb=pairwise_resource("disk_mb"),
        params:
            **EXTRINSIC_JOB_PARAMS,
            sources=lambda wildcards: EXTRINSIC_PARTS[int(wildcards.part)],
        script:
            "../scripts/extrinsic.py"

    rule extrinsic:
        input:
            parts=expand(
                f"{RESULTS}/extrinsic/{{{{task}}}}/{{{{layer}}}}/parts/{{part}}/d_psi_diagnostics.csv",
                part=range(len(EXTRINSIC_PARTS)),
            ),
            matrices=expand(
                f"{RESULTS}/extrinsic/{{{{task}}}}/{{{{layer}}}}/parts/{{part}}/{{name}}.csv",
                part=range(len(EXTRINSIC_PARTS)),
                name=EXTRINSIC_MATRICES,
            ),
        output:
            **extrinsic_files(f"{RESULTS}/extrinsic/{{task}}/{{layer}}"),
        log:
            job_log("extrinsic/{task}_{layer}"),
        benchmark:
            job_benchmark("extrinsic/{task}_{layer}")
        conda:
            "../envs/compute.yaml"
        resources:
            mem_mb=fixed_resource("table", "mem_mb"),
            runtime=fixed_resource("table", "runtime"),
        params:
            encoders=ENCODERS,
            parts=EXTRINSIC_PARTS,
            matrices=EXTRINSIC_MATRICES,
        script:
            "../scripts/extrinsic_merge.py"


rule extrinsic_summary:
    input:
        unpack(extrinsic_summary_inputs),
    output:
        f"{RESULTS}/extrinsic/summary.csv",
    log:
        job_log("extrinsic_summary"),
    benchmark:
        job_benchmark("extrinsic_summary")
    conda:
        "../envs/compute.yaml"
    resources:
        mem_mb=fixed_resource("table", "mem_mb"),
        runtime=fixed_resource("table", "runtime"),
    params:
        task_layers=[(t, l) for t in TASKS for l in EXTRINSIC_LAYERS],
        matrices=EXTRINSIC_SUMMARY_MATRICES,
        tol=config["extrinsic"]["tol"],
    script:
        "../scripts/extrinsic_summary.py"
