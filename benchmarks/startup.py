"""Each workflow script's start-up against a bare interpreter, side by side.

    python -m benchmarks startup [--repeats 3] [--scripts probe intrinsic ...]

A job's start-up is what it costs before its work: a fresh interpreter, Snakemake's script preamble
and the module-level imports of its script. For every script of workflow/scripts/ (or those named),
the CPU seconds of a fresh interpreter running that preamble and those imports, against one running
nothing, alternating, the median of ``--repeats``; one process at a time.
"""

from __future__ import annotations

import argparse
import ast
import os
import resource
import statistics
import subprocess
import sys

from benchmarks.common import REPO, load_text, ratio, say

SCRIPTS = REPO / "workflow" / "scripts"
PREAMBLE = ("import pickle; from snakemake.logging import logger; from snakemake.iocontainers import Snakemake; "
            "from snakemake.shell import shell")


def script_imports(name: str) -> str:
    """The module-level import statements of a workflow script, as source."""
    source = (SCRIPTS / f"{name}.py").read_text(encoding="utf-8")
    return "\n".join(ast.get_source_segment(source, node) for node in ast.parse(source).body
                     if isinstance(node, (ast.Import, ast.ImportFrom)))


def child_cpu_seconds(code: str) -> float:
    """User and system CPU seconds of a fresh interpreter running ``code`` (from the scripts' folder)."""
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", HF_HUB_OFFLINE="1", PYTHONPATH=str(REPO / "src"))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", code], cwd=SCRIPTS, env=env, check=True, capture_output=True, timeout=600)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks startup", description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scripts", nargs="+", help="script names (default: every script of workflow/scripts/)")
    args = parser.parse_args(argv)
    names = args.scripts or sorted(path.stem for path in SCRIPTS.glob("*.py"))
    say(f"data: workflow/scripts/ ({len(names)} scripts); sizes: median of {args.repeats}; dtype: -; device: cpu; "
        f"one interpreter at a time on {os.cpu_count()} CPUs; {sys.executable}; {load_text()}")
    say(f"{'script':<30} {'bare s':>7} {'start-up s':>10} {'/ bare':>8}")
    for name in names:
        code = PREAMBLE + "\n" + script_imports(name)
        bare, started = [], []
        for _ in range(args.repeats):
            bare.append(child_cpu_seconds("pass"))
            started.append(child_cpu_seconds(code))
        bare_s, started_s = statistics.median(bare), statistics.median(started)
        say(f"{name:<30} {bare_s:7.2f} {started_s:10.2f} {ratio(started_s, bare_s):>8}")
    say(load_text())
    return 0
