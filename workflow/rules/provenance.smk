# What produced this run: code, software, hardware, model revisions, data fingerprints, config.


rule provenance:
    input:
        data=expand(f"{RESULTS}/data/{{task}}/{{split}}.json", task=TASKS, split=SPLITS),
        embeddings=expand(
            f"{RESULTS}/embeddings/{{encoder}}/{{task}}/{{split}}.json",
            encoder=ENCODERS,
            task=TASKS,
            split=SPLITS,
        ),
        staging=f"{RESULTS}/staging.json",
        # the run's other results: provenance is collected last, with every stage's environment
        stages=[t for t in all_targets() if t != f"{RESULTS}/provenance.json"],
    output:
        f"{RESULTS}/provenance.json",
    log:
        job_log("provenance"),
    benchmark:
        job_benchmark("provenance")
    conda:
        "../envs/compute.yaml"
    resources:
        mem_mb=fixed_resource("marker", "mem_mb"),
        runtime=fixed_resource("marker", "runtime"),
    params:
        config=config,
        repo=str(PROJECT_DIR),
        logs=f"{RESULTS}/logs",
    script:
        "../scripts/provenance.py"
