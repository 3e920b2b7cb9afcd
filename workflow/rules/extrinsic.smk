# Stage 4: task probes (and the random-label probes of d_worst) per (encoder, task) for every layer,
# their tables, the extrinsic distances d_psi, d_worst and d_worst_search with Lemma 5.2's bounds,
# and a run summary.


rule probe:
    input:
        train=f"{RESULTS}/embeddings/{{encoder}}/{{task}}/train.npy",
        dev=f"{RESULTS}/embeddings/{{encoder}}/{{task}}/dev.npy",
        train_table=f"{RESULTS}/data/{{task}}/train.parquet",
        dev_table=f"{RESULTS}/data/{{task}}/dev.parquet",
    output:
        weights=expand(
            f"{RESULTS}/probes/{{{{task}}}}/weights/{{{{encoder}}}}/{{layer}}.npz",
            layer=LAYERS,
        ),
        metrics=f"{RESULTS}/probes/{{task}}/metrics/{{encoder}}.csv",
    log:
        f"{RESULTS}/logs/probe/{{encoder}}_{{task}}.log",
    conda:
        "../envs/compute.yaml"
    resources:
        mem_mb=probe_resource("mem_mb"),
        runtime=probe_resource("runtime"),
    params:
        task_spec=lambda wildcards: config["tasks"][wildcards.task],
        layers=LAYERS,
        settings=config["probe"],
        n_random=config["extrinsic"]["n_random_classifiers"],
        random_probes=config["extrinsic"]["random_probes"],
    script:
        "../scripts/probe.py"


rule probe_table:
    input:
        expand(f"{RESULTS}/probes/{{{{task}}}}/metrics/{{encoder}}.csv", encoder=ENCODERS),
    output:
        f"{RESULTS}/probes/{{task}}/{{layer}}.csv",
    log:
        f"{RESULTS}/logs/probe_table/{{task}}_{{layer}}.log",
    conda:
        "../envs/compute.yaml"
    resources:
        mem_mb=fixed_resource("marker", "mem_mb"),
        runtime=fixed_resource("marker", "runtime"),
    params:
        encoders=ENCODERS,
    script:
        "../scripts/probe_table.py"


rule extrinsic:
    input:
        embeddings=all_train_embeddings,
        probes=probe_weights,
        d_aff=f"{RESULTS}/intrinsic/{{task}}/{{layer}}/d_aff.csv",
        map_weights=f"{RESULTS}/intrinsic/{{task}}/{{layer}}/d_aff_weights.npy",
    output:
        d_psi=f"{RESULTS}/extrinsic/{{task}}/{{layer}}/d_psi.csv",
        d_worst=f"{RESULTS}/extrinsic/{{task}}/{{layer}}/d_worst.csv",
        bound=f"{RESULTS}/extrinsic/{{task}}/{{layer}}/bound.csv",
        d_worst_search=f"{RESULTS}/extrinsic/{{task}}/{{layer}}/d_worst_search.csv",
        bound_worst=f"{RESULTS}/extrinsic/{{task}}/{{layer}}/bound_worst.csv",
        diagnostics=f"{RESULTS}/extrinsic/{{task}}/{{layer}}/d_psi_diagnostics.csv",
    log:
        f"{RESULTS}/logs/extrinsic/{{task}}_{{layer}}.log",
    conda:
        "../envs/compute.yaml"
    threads: 2
    resources:
        gpu=GPU_REQUEST,
        mem_mb=pairwise_resource("mem_mb"),
        runtime=pairwise_resource("runtime"),
        disk_mb=pairwise_resource("disk_mb"),
    params:
        encoders=ENCODERS,
        settings=config["extrinsic"],
        multiplier=config["intrinsic"]["rank_tolerance_multiplier"],
        device=config["device"],
    script:
        "../scripts/extrinsic.py"


rule extrinsic_summary:
    input:
        d_psi=matrix_files("extrinsic", "d_psi"),
        d_worst=matrix_files("extrinsic", "d_worst"),
        bound=matrix_files("extrinsic", "bound"),
        d_worst_search=matrix_files("extrinsic", "d_worst_search"),
        bound_worst=matrix_files("extrinsic", "bound_worst"),
        diagnostics=matrix_files("extrinsic", "d_psi_diagnostics"),
        solver=matrix_files("intrinsic", "d_aff_solver"),
        probes=[f"{RESULTS}/probes/{t}/{l}.csv" for t in TASKS for l in LAYERS],
    output:
        f"{RESULTS}/extrinsic/summary.csv",
    log:
        f"{RESULTS}/logs/extrinsic_summary.log",
    conda:
        "../envs/compute.yaml"
    resources:
        mem_mb=fixed_resource("table", "mem_mb"),
        runtime=fixed_resource("table", "runtime"),
    params:
        task_layers=[(t, l) for t in TASKS for l in LAYERS],
    script:
        "../scripts/extrinsic_summary.py"
