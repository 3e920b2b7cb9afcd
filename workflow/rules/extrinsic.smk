# Stage 4: task probes per (encoder, task) for every layer, their tables, and extrinsic distances.


rule probe:
    input:
        train=f"{RESULTS}/embeddings/{{encoder}}/{{task}}/train.npy",
        dev=f"{RESULTS}/embeddings/{{encoder}}/{{task}}/dev.npy",
        train_table=f"{RESULTS}/data/{{task}}/train.parquet",
        dev_table=f"{RESULTS}/data/{{task}}/dev.parquet",
    output:
        weights=expand(
            f"{RESULTS}/probes/{{{{task}}}}/weights/{{{{encoder}}}}/layer{{layer}}.npz",
            layer=LAYERS,
        ),
        metrics=f"{RESULTS}/probes/{{task}}/metrics/{{encoder}}.csv",
    params:
        task_spec=lambda wildcards: config["tasks"][wildcards.task],
        layers=LAYERS,
        settings=config["probe"],
    log:
        f"{RESULTS}/logs/probe/{{encoder}}_{{task}}.log",
    conda:
        "../../envs/compute.yaml"
    script:
        "../scripts/probe.py"


rule probe_table:
    input:
        expand(f"{RESULTS}/probes/{{{{task}}}}/metrics/{{encoder}}.csv", encoder=ENCODERS),
    output:
        f"{RESULTS}/probes/{{task}}/layer{{layer}}.csv",
    params:
        encoders=ENCODERS,
    log:
        f"{RESULTS}/logs/probe_table/{{task}}_layer{{layer}}.log",
    conda:
        "../../envs/compute.yaml"
    script:
        "../scripts/probe_table.py"


rule extrinsic:
    input:
        embeddings=all_train_embeddings,
        probes=probe_weights,
    output:
        d_psi=f"{RESULTS}/extrinsic/{{task}}/layer{{layer}}/d_psi.csv",
        diagnostics=f"{RESULTS}/extrinsic/{{task}}/layer{{layer}}/d_psi_diagnostics.csv",
    params:
        encoders=ENCODERS,
        settings=config["extrinsic"],
        multiplier=config["intrinsic"]["rank_tolerance_multiplier"],
        device=config["device"],
    resources:
        gpu=PAIRWISE_GPU,
    log:
        f"{RESULTS}/logs/extrinsic/{{task}}_layer{{layer}}.log",
    conda:
        "../../envs/compute.yaml"
    script:
        "../scripts/extrinsic.py"
