"""A study's first stages run by this checkout's workflow and by another commit's, side by side.

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python -m benchmarks.run_stages --ref HEAD~1 [--until embed derive]
        [--configfile config/config.yaml] [--repeats 2] [--cores 2]

Each side runs ``snakemake --until <rules>`` (the rules and every job before them) on the config from
an empty working directory, the other commit's ``workflow/``, ``src/`` and ``config/`` taken by ``git archive``
(its package first on ``PYTHONPATH``, so its jobs run its code), alternating sides, ``--repeats``
times. It prints each side's jobs per rule, the CPU of the whole process tree (Snakemake and its
jobs: ``getrusage`` of the children) and the wall time, the median over the repeats, and the ratios;
then whether the two sides' result files are bit-identical (:mod:`benchmarks.compare_runs`, on the
last repeat of each).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import REPO, extract_commit, load_text, say
from benchmarks.compare_runs import compare


def run_once(snakefile: Path, src: Path, workdir: Path, configfile: Path, until: list[str], cores: int,
             ) -> tuple[float, float, dict[str, int]]:
    """One Snakemake run from an empty ``workdir``: (CPU s of the process tree, wall s, jobs per rule)."""
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    shutil.copytree(configfile.parent, workdir / "config")
    env = dict(os.environ, PYTHONPATH=str(src), OMP_WAIT_POLICY="PASSIVE", HF_HUB_OFFLINE="1")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(snakefile), "--directory", str(workdir), "--cores", str(cores),
         "--configfile", str(workdir / "config" / configfile.name), "--until", *until],
        capture_output=True, text=True, env=env, cwd=workdir)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        raise SystemExit(f"snakemake failed in {workdir}:\n{result.stderr[-3000:]}")
    table = result.stderr.split("Job stats:")[1].split("\n\n")[0]
    jobs = {}
    for line in table.splitlines()[3:]:
        name, _, count = line.rpartition(" ")
        if name.strip() and name.strip() != "total" and count.isdigit():
            jobs[name.strip()] = int(count)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, jobs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ref", required=True, help="the commit to compare against")
    parser.add_argument("--configfile", type=Path, default=REPO / "config" / "config.yaml",
                        help="the study (default: the demo); its folder is copied as config/")
    parser.add_argument("--until", nargs="+", default=["embed", "derive"],
                        help="the rules to run up to, with every job before them (default: embed derive)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--cores", type=int, default=2)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        extract_commit(args.ref, ["src", "workflow", "config"], root / "ref")
        sides = {args.ref: (root / "ref" / "workflow" / "Snakefile", root / "ref" / "src"),
                 "checkout": (REPO / "workflow" / "Snakefile", REPO / "src")}
        say(f"snakemake --until {' '.join(args.until)} on {args.configfile.name}, --cores {args.cores}, "
            f"{args.repeats} repeats alternating, {os.cpu_count()} CPUs; {load_text()}")
        measured: dict[str, list[tuple[float, float, dict[str, int]]]] = {side: [] for side in sides}
        for repeat in range(args.repeats):
            for side, (snakefile, src) in sides.items():
                cpu, wall, jobs = run_once(snakefile, src, root / side.replace("/", "_") / "run", args.configfile,
                                           args.until, args.cores)
                measured[side].append((cpu, wall, jobs))
                say(f"  repeat {repeat + 1}, {side}: {sum(jobs.values())} jobs, {cpu:.1f} CPU s, {wall:.1f} s wall")
        summary = {}
        for side, runs in measured.items():
            cpu, wall = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
            summary[side] = (cpu, wall)
            say(f"{side}: jobs {runs[-1][2]}; median {cpu:.1f} CPU s, {wall:.1f} s wall")
        (ref_cpu, ref_wall), (our_cpu, our_wall) = summary[args.ref], summary["checkout"]
        say(f"checkout / {args.ref}: CPU {our_cpu / ref_cpu:.3f}x, wall {our_wall / ref_wall:.3f}x; {load_text()}")
        # the run's folder (results/<run_name>), where compare_runs leaves out logs/ and benchmarks/
        runs = [next((root / side.replace("/", "_") / "run" / "results").iterdir()) for side in sides]
        identical, _, problems = compare(*runs)
        say(f"result files: {sum(identical.values())} identical; "
            + ("bit-identical" if not problems else f"{len(problems)} differ: {problems[:5]}"))


if __name__ == "__main__":
    main()
