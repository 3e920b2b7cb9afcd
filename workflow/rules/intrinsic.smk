# Stage 3: intrinsic distances, one job per (task, layer) over all ordered encoder pairs.


rule intrinsic:
    input:
        all_train_embeddings,
    output:
        d_aff=f"{RESULTS}/intrinsic/{{task}}/layer{{layer}}/d_aff.csv",
        rank=f"{RESULTS}/intrinsic/{{task}}/layer{{layer}}/rank.csv",
    params:
        encoders=ENCODERS,
        settings=config["intrinsic"],
        device=config["device"],
    log:
        f"{RESULTS}/logs/intrinsic/{{task}}_layer{{layer}}.log",
    conda:
        "../../envs/compute.yaml"
    script:
        "../scripts/intrinsic.py"
