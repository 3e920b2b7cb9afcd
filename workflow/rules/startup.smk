# Start-up checks, run once when Snakemake reads the workflow: the environment the jobs inherit, the
# installed package, the config and its data, and the device.
import os
from pathlib import Path

from snakemake.exceptions import WorkflowError

# torch and numpy share processes: a busy-waiting OpenMP pool slows small machines many times over.
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
from affine_homotopy.study.validation import check_config

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
