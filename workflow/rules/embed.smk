# Stage 2: representations. Model encoders run the transformer once per (encoder, task): one model
# load for both splits, all configured layers in one forward pass a batch; derived encoders transform
# their base's arrays; embeddings encoders import arrays computed elsewhere (one file per task, both
# splits).


rule embed:
    input:
        train_table=f"{RESULTS}/data/{{task}}/train.parquet",
        dev_table=f"{RESULTS}/data/{{task}}/dev.parquet",
        staged=staged_model_input,
    output:
        train=f"{RESULTS}/embeddings/{{encoder}}/{{task}}/train.npy",
        train_meta=f"{RESULTS}/embeddings/{{encoder}}/{{task}}/train.json",
        dev=f"{RESULTS}/embeddings/{{encoder}}/{{task}}/dev.npy",
        dev_meta=f"{RESULTS}/embeddings/{{encoder}}/{{task}}/dev.json",
    log:
        job_log("embed/{encoder}_{task}"),
    benchmark:
        job_benchmark("embed/{encoder}_{task}")
    wildcard_constraints:
        encoder=_alternatives(MODEL_ENCODERS),
    # first: every later job waits for embeddings, and the rest of the run then has the most jobs
    # ready to keep the cores busy
    priority: 2
    conda:
        "../envs/embed.yaml"
    threads: config["embedding"]["threads"]
    resources:
        gpu=GPU_REQUEST,
        mem_mb=embed_resource("mem_mb"),
        runtime=embed_resource("runtime"),
        disk_mb=embed_resource("disk_mb"),
    params:
        spec=lambda wildcards: config["encoders"][wildcards.encoder],
        staged=lambda wildcards: (
            f"resources/models/{wildcards.encoder}"
            if config["encoders"][wildcards.encoder]["source"] in ("hf", "pypi")
            else None
        ),
        layers=LAYER_POSITIONS,
        positions=LAYERS,
        embedding=EMBEDDING_SETTINGS,
        device=config["device"],
    script:
        "../scripts/embed.py"


rule import_embeddings:
    input:
        file=embeddings_file,
        train_ids=f"{RESULTS}/data/{{task}}/train_ids.json",
        dev_ids=f"{RESULTS}/data/{{task}}/dev_ids.json",
    output:
        train=f"{RESULTS}/embeddings/{{encoder}}/{{task}}/train.npy",
        train_meta=f"{RESULTS}/embeddings/{{encoder}}/{{task}}/train.json",
        dev=f"{RESULTS}/embeddings/{{encoder}}/{{task}}/dev.npy",
        dev_meta=f"{RESULTS}/embeddings/{{encoder}}/{{task}}/dev.json",
    log:
        job_log("import_embeddings/{encoder}_{task}"),
    benchmark:
        job_benchmark("import_embeddings/{encoder}_{task}")
    wildcard_constraints:
        encoder=_alternatives(EMBEDDINGS_ENCODERS),
    # before the embed jobs: a file that does not fit its task stops the run early
    priority: 3
    conda:
        "../envs/embed.yaml"
    resources:
        mem_mb=lambda wildcards, attempt: embed_resources(
            TASK_SIZES[(wildcards.task, "train")] + TASK_SIZES[(wildcards.task, "dev")],
            WIDTHS[wildcards.encoder],
            2 * len(LAYERS),
            attempt,
        )["mem_mb"],
        runtime=lambda wildcards, attempt: 10 * attempt,
    params:
        spec=lambda wildcards: config["encoders"][wildcards.encoder],
        layers=LAYER_POSITIONS,
        positions=LAYERS,
        storage_dtype=config["embedding"]["storage_dtype"],
    script:
        "../scripts/import_embeddings.py"


rule derive:
    input:
        unpack(base_embeddings),
    output:
        train=f"{RESULTS}/embeddings/{{encoder}}/{{task}}/train.npy",
        train_meta=f"{RESULTS}/embeddings/{{encoder}}/{{task}}/train.json",
        dev=f"{RESULTS}/embeddings/{{encoder}}/{{task}}/dev.npy",
        dev_meta=f"{RESULTS}/embeddings/{{encoder}}/{{task}}/dev.json",
    log:
        job_log("derive/{encoder}_{task}"),
    benchmark:
        job_benchmark("derive/{encoder}_{task}")
    wildcard_constraints:
        encoder=_alternatives(DERIVED_ENCODERS),
    conda:
        "../envs/compute.yaml"
    resources:
        mem_mb=lambda wildcards, attempt: embed_resources(
            TASK_SIZES[(wildcards.task, "train")] + TASK_SIZES[(wildcards.task, "dev")],
            WIDTHS[wildcards.encoder],
            2 * len(LAYERS),
            attempt,
        )["mem_mb"],
        runtime=lambda wildcards, attempt: 10 * attempt,
    params:
        spec=lambda wildcards: config["encoders"][wildcards.encoder],
        rank_multiplier=config["intrinsic"]["rank_multiplier"],
        storage_dtype=config["embedding"]["storage_dtype"],
    script:
        "../scripts/derive.py"
