# Stage 1: tasks -> standardised example tables (text_a, text_b, label) per split.


rule prepare_task:
    input:
        staged=staged_task_input,
    output:
        table=f"{RESULTS}/data/{{task}}/{{split}}.parquet",
        meta=f"{RESULTS}/data/{{task}}/{{split}}.json",
    log:
        f"{RESULTS}/logs/prepare_task/{{task}}_{{split}}.log",
    conda:
        "../envs/embed.yaml"
    resources:
        mem_mb=fixed_resource("data", "mem_mb"),
        runtime=fixed_resource("data", "runtime"),
    params:
        spec=lambda wildcards: config["tasks"][wildcards.task],
        staged=lambda wildcards: (
            f"resources/data/{wildcards.task}" if config["tasks"][wildcards.task]["source"] == "glue" else None
        ),
    script:
        "../scripts/prepare_task.py"
