"""``python -m affine_homotopy.costs measure|fit|project|check``: see :mod:`affine_homotopy.costs`."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ..errors import AffineHomotopyError

SCHEMA = Path("workflow") / "schemas" / "config.schema.yaml"


def project(configfile: Path, cores: int) -> None:
    """Print the projected CPU time of a config per rule and stage, with its disk and memory estimate."""
    import yaml

    from ..study.validation import check_config
    from .model import stage_costs
    from .study import study_estimate

    config = check_config(yaml.safe_load(configfile.read_text(encoding="utf-8")), SCHEMA)
    estimate = study_estimate(config)
    projection = estimate["projection"]
    print(f"config {configfile} (run {config['run_name']!r}): embeddings need "
          f"{estimate['embeddings_disk_mb'] / 1024:.2f} GB of disk; the largest job needs about "
          f"{estimate['largest_job_mem_mb'] / 1024:.1f} GB of memory")
    print("projected single-thread CPU time of the pairwise rules (embedding not included), on the cost model's "
          "machine, the jobs spread over the cores with perfect efficiency")
    print(f"{'rule':18s} {'CPU hours':>10s} {'hours on ' + str(cores) + ' cores':>18s}")
    for rule, seconds in sorted(projection.rules.items(), key=lambda kv: -kv[1]):
        print(f"{rule:18s} {seconds / 3600:10.3g} {seconds / 3600 / cores:18.3g}")
    print(f"{'total':18s} {projection.total / 3600:10.3g} {projection.total / 3600 / cores:18.3g}")
    print("stages (CPU hours): " + ", ".join(f"{s} {v / 3600:.3g}" for s, v in
                                            sorted(projection.stages.items(), key=lambda kv: -kv[1]) if v))
    print(f"dominant stage: {projection.dominant_stage} (per {stage_costs()[projection.dominant_stage].unit})")


def measure_parser(sub: argparse._SubParsersAction) -> None:
    from .measure_data import add_glue_dir

    m = sub.add_parser("measure", help="time the stages (stages), a job's other costs (jobs), a reference run's "
                                       "work per job (work RUN) or this machine's speed (calibrate)")
    m.add_argument("what", nargs="?", default="stages", choices=["stages", "jobs", "work", "calibrate"])
    m.add_argument("run", type=Path, nargs="?", help="measure work: a finished run's results folder")
    add_glue_dir(m)
    m.add_argument("--repeats", type=int, default=3, help="jobs, calibrate: repeats per measurement")
    m.add_argument("--n", type=int, default=512, help="jobs: SST-2 sentences for the embed forward pass")
    m.add_argument("--only-correlation", action="store_true", help="jobs: only the Table 1 correlation cells")
    m.add_argument("--only-tokens", action="store_true", help="jobs: only the sentences' mean tokens per example")
    m.add_argument("--quick", action="store_true", help="stages: two sizes only")
    m.add_argument("--only-solver", action="store_true", help="stages: only the factorisation and d_aff")
    m.add_argument("--wide-model", choices=["minilm-layers", "mpnet"], default="minilm-layers",
                   help="stages: the D = 768 encoders, two MiniLM-L6 layers side by side or all-mpnet-base-v2's layers")
    m.add_argument("--data-task", choices=["sst2", "cola", "mrpc", "rte"], default="sst2",
                   help="stages: the D = 384 runs' task (its first training examples; default: SST-2 sampled)")
    m.add_argument("--wide-task", choices=["sst2", "cola", "mrpc", "rte"], default="sst2",
                   help="stages, with --wide-model mpnet: the task whose first training examples it embeds")
    m.add_argument("--not-fitted", action="store_true", help="stages: record the rows with fit 'no'")
    m.add_argument("--only-exact", action="store_true", help="stages: only the extrinsic stages of exact pairs")
    m.add_argument("--only-extrinsic", action="store_true", help="stages: only the probes and the extrinsic stages")
    m.add_argument("--sizes", type=int, nargs="+", help="stages: these N only")
    m.add_argument("--wide-sizes", type=int, nargs="*", help="stages: the N at D = 768")
    m.add_argument("--wide-only", action="store_true", help="stages: only the D = 768 runs")
    m.add_argument("--narrow-ranks", type=int, nargs="*", default=[],
                   help="stages: also sources of these ranks below 384 (SVD-truncated as svd_truncate derives them)")
    m.add_argument("--narrow-sizes", type=int, nargs="+", default=[2000], help="stages: the N of the narrow runs")
    m.add_argument("--narrow-only", action="store_true", help="stages: only the narrow runs")
    m.add_argument("--n-random", type=int, help="stages: random classifiers per target")
    m.add_argument("--search-sizes", type=int, nargs="+", help="stages: measure d_worst_search only at these N")


def measure(args: argparse.Namespace) -> None:
    if args.what == "stages":
        from .measure import measure_stages

        measure_stages(args)
    elif args.what == "work":
        from .measure_jobs import measure_work

        if args.run is None:
            raise SystemExit("measure work needs a finished run's results folder, e.g. results/reviews")
        measure_work(args.run)
    else:
        from . import measure_jobs

        {"jobs": measure_jobs.measure_jobs, "calibrate": measure_jobs.calibrate}[args.what](args)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m affine_homotopy.costs", description=__doc__.split(":")[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    measure_parser(sub)
    sub.add_parser("fit", help="fit the measurements into data/cost_coefficients.json")
    p = sub.add_parser("project", help="the projected CPU time of a config")
    p.add_argument("--configfile", type=Path, default=Path("config") / "config.yaml")
    p.add_argument("--cores", type=int, default=1)
    k = sub.add_parser("check", help="the projection against a finished run's job records")
    k.add_argument("run", type=Path, help="a finished run's results folder, e.g. results/demo")
    k.add_argument("--cores", type=int, default=os.cpu_count() or 1,
                   help="the cores the run had, for the least wall time its work allows (default: this machine's)")
    k.add_argument("--snakefile", type=Path, default=Path("workflow") / "Snakefile")
    args = parser.parse_args(argv)
    try:
        if args.mode == "measure":
            measure(args)
        elif args.mode == "fit":
            from .fit import fit

            fit()
        elif args.mode == "project":
            project(args.configfile, args.cores)
        else:
            from .check import check

            check(args.run, args.cores, args.snakefile)
    except AffineHomotopyError as error:
        print(f"{args.mode}: {error}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
