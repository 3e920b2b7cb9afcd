# Stage 1: tasks -> standardised example tables (text_a, text_b, label) per split, with the examples' ids.


rule prepare_task:
    input:
        staged=staged_task_input,
        files=table_task_files,
    # both splits from one load of the task; with each split its examples' ids, in the table's order
    # (an embeddings file's rows are tied to them)
    output:
        **{
            f"{split}_{kind}": f"{RESULTS}/data/{{task}}/{split}{suffix}"
            for split in SPLITS
            for kind, suffix in (("table", ".parquet"), ("meta", ".json"), ("ids", "_ids.json"))
        },
    log:
        job_log("prepare_task/{task}"),
    benchmark:
        job_benchmark("prepare_task/{task}")
    conda:
        "../envs/embed.yaml"
    resources:
        mem_mb=fixed_resource("data", "mem_mb"),
        runtime=fixed_resource("data", "runtime"),
    params:
        spec=lambda wildcards: config["tasks"][wildcards.task],
        staged=lambda wildcards: (
            f"resources/data/{wildcards.task}"
            if config["tasks"][wildcards.task]["source"] in ("glue", "hf_dataset")
            else None
        ),
    script:
        "../scripts/prepare_task.py"
