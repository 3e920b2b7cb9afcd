# Stage 1: tasks -> standardised example tables (text_a, text_b, label) per split.


rule prepare_task:
    output:
        table=f"{RESULTS}/data/{{task}}/{{split}}.parquet",
        meta=f"{RESULTS}/data/{{task}}/{{split}}.json",
    params:
        spec=lambda wildcards: config["tasks"][wildcards.task],
    log:
        f"{RESULTS}/logs/prepare_task/{{task}}_{{split}}.log",
    conda:
        "../../envs/embed.yaml"
    script:
        "../scripts/prepare_task.py"
