# Stage 2: representations. Model encoders run the transformer once per (encoder, task, split),
# all configured layers in one forward pass; derived encoders transform their base's arrays.


rule embed:
    input:
        table=f"{RESULTS}/data/{{task}}/{{split}}.parquet",
    output:
        array=f"{RESULTS}/embeddings/{{encoder}}/{{task}}/{{split}}.npy",
        meta=f"{RESULTS}/embeddings/{{encoder}}/{{task}}/{{split}}.json",
    wildcard_constraints:
        encoder=_alternatives(MODEL_ENCODERS),
    params:
        spec=lambda wildcards: config["encoders"][wildcards.encoder],
        layers=LAYERS,
        embedding=config["embedding"],
        device=config["device"],
    resources:
        gpu=1,
    log:
        f"{RESULTS}/logs/embed/{{encoder}}_{{task}}_{{split}}.log",
    conda:
        "../../envs/embed.yaml"
    script:
        "../scripts/embed.py"


rule derive:
    input:
        unpack(base_embeddings),
    output:
        train=f"{RESULTS}/embeddings/{{encoder}}/{{task}}/train.npy",
        train_meta=f"{RESULTS}/embeddings/{{encoder}}/{{task}}/train.json",
        dev=f"{RESULTS}/embeddings/{{encoder}}/{{task}}/dev.npy",
        dev_meta=f"{RESULTS}/embeddings/{{encoder}}/{{task}}/dev.json",
    wildcard_constraints:
        encoder=_alternatives(DERIVED_ENCODERS),
    params:
        spec=lambda wildcards: config["encoders"][wildcards.encoder],
        multiplier=config["intrinsic"]["rank_tolerance_multiplier"],
    log:
        f"{RESULTS}/logs/derive/{{encoder}}_{{task}}.log",
    conda:
        "../../envs/compute.yaml"
    script:
        "../scripts/derive.py"
