# What produced this run: code, software, hardware, model revisions, data fingerprints, config.


rule provenance:
    input:
        data=expand(f"{RESULTS}/data/{{task}}/{{split}}.json", task=TASKS, split=SPLITS),
        embeddings=expand(
            f"{RESULTS}/embeddings/{{encoder}}/{{task}}/{{split}}.json",
            encoder=ENCODERS,
            task=TASKS,
            split=SPLITS,
        ),
    output:
        f"{RESULTS}/provenance.json",
    params:
        config=config,
        repo=workflow.basedir,
    log:
        f"{RESULTS}/logs/provenance.log",
    conda:
        "../../envs/compute.yaml"
    script:
        "../scripts/provenance.py"
