"""Each workflow job's start-up, this checkout's package against another commit's, side by side.

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python -m benchmarks.job_startup --ref HEAD [--configfile config/config.yaml]

A job's start-up is what it costs before its work: a fresh interpreter, Snakemake's script preamble
and the module-level imports of its rule's script (what ``cost_model measure-jobs`` measures per
rule). For every rule that runs a script, the CPU seconds of that start-up with this checkout's
``src/`` and scripts, and with those of ``--ref`` (``git archive`` into a temporary folder),
alternating, the median of ``--repeats``; then the sums weighted by the config's jobs per rule
(:func:`affine_homotopy.jobs.resources.planned_jobs`). One process at a time, on one core.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path

from benchmarks.common import REPO, SCHEMA, extract_commit, load_text, say


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ref", default="HEAD", help="the commit to compare against (default HEAD)")
    parser.add_argument("--configfile", type=Path, default=REPO / "config" / "config.yaml",
                        help="the config whose jobs weight the rules (default: the demo)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    import yaml

    from affine_homotopy.jobs.resources import planned_jobs
    from affine_homotopy.study.validation import check_config
    from benchmarks.cost_model import SCRIPT_PREAMBLE, child_cpu_seconds, rule_scripts, script_imports

    jobs = planned_jobs(check_config(yaml.safe_load(args.configfile.read_text()), SCHEMA))
    with tempfile.TemporaryDirectory() as folder:
        other = extract_commit(args.ref, ["src", "workflow"], Path(folder))
        say(f"start-up per job: {args.ref} ({other}) against this checkout, median of {args.repeats}, alternating; "
            f"jobs per rule from {args.configfile.name}; {load_text()}")
        say(f"{'rule':32s} {'jobs':>4s} {args.ref[:10]:>10s} {'checkout':>9s} {'ratio':>6s}")
        totals = [0.0, 0.0]
        ours, theirs = rule_scripts(), rule_scripts(other / "workflow" / "rules")
        for rule in sorted(set(ours) & set(theirs)):
            count = jobs.get(rule, 0)
            if not count:
                continue
            codes = [(SCRIPT_PREAMBLE + "\n" + script_imports(other / "workflow" / "scripts" / theirs[rule].name),
                      other / "src"), (SCRIPT_PREAMBLE + "\n" + script_imports(ours[rule]), REPO / "src")]
            runs: list[list[float]] = [[], []]
            for _ in range(args.repeats):
                for side, (code, src) in enumerate(codes):
                    os.environ["PYTHONPATH"] = str(src)
                    runs[side].append(child_cpu_seconds(code)[0])
            ref, mine = (statistics.median(r) for r in runs)
            totals[0] += count * ref
            totals[1] += count * mine
            say(f"{rule:32s} {count:4d} {ref:10.2f} {mine:9.2f} {mine / ref:6.2f}")
        os.environ.pop("PYTHONPATH", None)
    say(f"all {sum(c for r, c in jobs.items() if r in ours)} script jobs: start-up {totals[0]:.1f} CPU s at "
        f"{args.ref}, {totals[1]:.1f} CPU s here ({totals[1] / totals[0]:.3f}x); {load_text()}")


if __name__ == "__main__":
    main()
