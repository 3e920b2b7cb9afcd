# Stage 4: task probes (and the random-label probes of d_worst) per (encoder, task) for every layer,
# their tables, the extrinsic distances d_psi and d_worst with Lemma 5.2's bound, and a run summary.


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
        n_random=config["extrinsic"]["n_random_classifiers"],
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
        d_aff=f"{RESULTS}/intrinsic/{{task}}/layer{{layer}}/d_aff.csv",
        map_weights=f"{RESULTS}/intrinsic/{{task}}/layer{{layer}}/d_aff_weights.npy",
    output:
        d_psi=f"{RESULTS}/extrinsic/{{task}}/layer{{layer}}/d_psi.csv",
        d_worst=f"{RESULTS}/extrinsic/{{task}}/layer{{layer}}/d_worst.csv",
        bound=f"{RESULTS}/extrinsic/{{task}}/layer{{layer}}/bound.csv",
        diagnostics=f"{RESULTS}/extrinsic/{{task}}/layer{{layer}}/d_psi_diagnostics.csv",
    params:
        encoders=ENCODERS,
        settings=config["extrinsic"],
        multiplier=config["intrinsic"]["rank_tolerance_multiplier"],
        device=config["device"],
    threads: 2
    resources:
        gpu=PAIRWISE_GPU,
        mem_mb=pairwise_resource("mem_mb"),
        runtime=pairwise_resource("runtime"),
        disk_mb=pairwise_resource("disk_mb"),
    log:
        f"{RESULTS}/logs/extrinsic/{{task}}_layer{{layer}}.log",
    conda:
        "../../envs/compute.yaml"
    script:
        "../scripts/extrinsic.py"


rule extrinsic_summary:
    input:
        d_psi=matrix_files("extrinsic", "d_psi"),
        d_worst=matrix_files("extrinsic", "d_worst"),
        bound=matrix_files("extrinsic", "bound"),
        probes=[f"{RESULTS}/probes/{t}/layer{l}.csv" for t in TASKS for l in LAYERS],
    output:
        f"{RESULTS}/extrinsic/summary.csv",
    params:
        task_layers=[(t, l) for t in TASKS for l in LAYERS],
    log:
        f"{RESULTS}/logs/extrinsic_summary.log",
    conda:
        "../../envs/compute.yaml"
    script:
        "../scripts/extrinsic_summary.py"
