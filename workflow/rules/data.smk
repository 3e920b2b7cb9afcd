# Stage 1: tasks -> standardised example tables (text_a, text_b, label) per split, with the examples' ids.


rule prepare_task:
    input:
        staged=staged_task_input,
        files=table_task_files,
    output:
        table=f"{RESULTS}/data/{{task}}/{{split}}.parquet",
        meta=f"{RESULTS}/data/{{task}}/{{split}}.json",
        # the examples' ids, in the table's order (an embeddings file's rows are tied to them)
        ids=f"{RESULTS}/data/{{task}}/{{split}}_ids.json",
    log:
        job_log("prepare_task/{task}_{split}"),
    benchmark:
        job_benchmark("prepare_task/{task}_{split}")
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
