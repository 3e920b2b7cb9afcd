# Stage 0: staging. Hub models and GLUE data are fetched once into resources/ by local rules (on a
# cluster they run on the submit host, which has internet); every compute job reads resources/
# only, with the hub switched off.

HF_ENCODERS = [e for e in ENCODERS if config["encoders"][e]["source"] == "hf"]
GLUE_TASKS_STAGED = [t for t in TASKS if config["tasks"][t]["source"] == "glue"]


localrules:
    download_model,
    download_task,


rule download_model:
    output:
        f"resources/models/{{encoder}}/STAGED.json",
    wildcard_constraints:
        encoder=_alternatives(HF_ENCODERS),
    params:
        spec=lambda wildcards: config["encoders"][wildcards.encoder],
        folder=lambda wildcards: f"resources/models/{wildcards.encoder}",
    log:
        f"{RESULTS}/logs/download/model_{{encoder}}.log",
    conda:
        "../../envs/embed.yaml"
    script:
        "../scripts/download_model.py"


rule download_task:
    output:
        train="resources/data/{task}/train.parquet",
        dev="resources/data/{task}/dev.parquet",
        marker="resources/data/{task}/STAGED.json",
    wildcard_constraints:
        task=_alternatives(GLUE_TASKS_STAGED),
    params:
        spec=lambda wildcards: config["tasks"][wildcards.task],
    log:
        f"{RESULTS}/logs/download/task_{{task}}.log",
    conda:
        "../../envs/embed.yaml"
    script:
        "../scripts/download_task.py"
