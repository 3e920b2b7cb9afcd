# Stage 3: intrinsic distances, one job per (task, layer) over all ordered encoder pairs: the
# certified affine distance, its least-squares and linear/isometric variants, and the baselines.

INTRINSIC_MEASURES = [
    "d_aff",
    "d_aff_lower",
    "d_aff_ls",
    "d_aff_msd",
    "psi_norm",
    "d_lin",
    "d_iso",
    "procrustes",
    "cca_r2",
    "cca_rho",
    "pwcca",
    "svcca",
    "cka",
]


rule intrinsic:
    input:
        all_train_embeddings,
    output:
        **{
            m: f"{RESULTS}/intrinsic/{{task}}/layer{{layer}}/{m}.csv"
            for m in INTRINSIC_MEASURES
        },
        rank=f"{RESULTS}/intrinsic/{{task}}/layer{{layer}}/rank.csv",
        solver=f"{RESULTS}/intrinsic/{{task}}/layer{{layer}}/d_aff_solver.csv",
        weights=f"{RESULTS}/intrinsic/{{task}}/layer{{layer}}/d_aff_weights.npy",
    params:
        encoders=ENCODERS,
        measures=INTRINSIC_MEASURES,
        settings=config["intrinsic"],
        device=config["device"],
    threads: 2
    resources:
        gpu=PAIRWISE_GPU,
        mem_mb=pairwise_resource("mem_mb"),
        runtime=pairwise_resource("runtime"),
        disk_mb=pairwise_resource("disk_mb"),
    log:
        f"{RESULTS}/logs/intrinsic/{{task}}_layer{{layer}}.log",
    conda:
        "../../envs/compute.yaml"
    script:
        "../scripts/intrinsic.py"
