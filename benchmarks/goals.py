"""The cost goals' table: each goal's latest measured value beside its target, from one dated record.

Run from the repository root::

    .venv/bin/python -m benchmarks.goals                      # print the table
    .venv/bin/python -m benchmarks.goals time demo -- .venv/bin/snakemake --cores 2 --directory /tmp/fresh-clone
    .venv/bin/python -m benchmarks.goals time suite -- bash .ci/run

Every measurement is a row of ``benchmarks/goal_measurements.csv`` (goal, value, unit, date, commit,
1-minute load average, machine, what was measured), appended by the script that measured it:
:mod:`benchmarks.daff_passes` (``daff_passes``: the most passes of any pair at N = 67,349),
:mod:`benchmarks.worst_search_budget` (``search_ratio``, ``search_stability``), ``cost_model project``
(``paper_projection``), ``cost_model check`` (``cost_check_demo``, ``cost_check_real_models``: the
largest per-rule deviation), and ``time`` here (``suite``, ``demo``: the wall seconds of a command).
The table shows the newest row of each goal; goals with no row say so.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.common import REPO, say

RECORD = Path(__file__).resolve().parent / "goal_measurements.csv"
FIELDS = ["goal", "value", "unit", "date", "commit", "load_1min", "machine", "what"]


@dataclass(frozen=True)
class Goal:
    key: str
    what: str
    target: float
    unit: str
    before: str  # the value the cost question started from


GOALS = (
    Goal("daff_passes", "d_aff passes per pair at N = 67,349 (real pairs), the most of any pair", 8, "passes",
         "26-92"),
    Goal("paper_projection", "paper-grid projection, re-measured", 100, "CPU h", "339 (stale rows)"),
    Goal("cost_check_demo", "cost model vs a measured run, per rule: the demo (largest deviation)", 25, "%",
         "never checked"),
    Goal("cost_check_real_models", "cost model vs a measured run, per rule: real_models.yaml", 25, "%",
         "never checked"),
    Goal("search_ratio", "certified d_worst_search at the default budget / certified d_psi, per pair", 10, "x",
         "370x"),
    Goal("search_stability", "search stability under jitter and threads, the largest change of any pair", 1, "%",
         "1.07 % (1 pair of 8)"),
    Goal("suite", "README command 2 on this machine (install and tests)", 600, "s", "18 min 35 s"),
    Goal("demo", "the demo from a fresh clone on this machine", 120, "s", "183 s"),
)


def commit() -> str:
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO, capture_output=True,
                           text=True).stdout.strip()
    return head.stdout.strip() + ("+dirty" if dirty else "")


def record(goal: str, value: float, unit: str, what: str) -> None:
    """Append one measurement of ``goal`` to the record (dated, commit-stamped, with the load)."""
    if goal not in {g.key for g in GOALS}:
        raise ValueError(f"unknown goal {goal!r}; one of {', '.join(g.key for g in GOALS)}")
    new = not RECORD.is_file()
    with RECORD.open("a", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=FIELDS)
        if new:
            writer.writeheader()
        writer.writerow({"goal": goal, "value": f"{value:.6g}", "unit": unit,
                         "date": datetime.date.today().isoformat(), "commit": commit(),
                         "load_1min": f"{os.getloadavg()[0]:.2f}", "machine": f"{platform.machine()} {os.cpu_count()} cores",
                         "what": what})


def latest() -> dict[str, dict[str, str]]:
    if not RECORD.is_file():
        return {}
    with RECORD.open(newline="") as handle:
        return {row["goal"]: row for row in csv.DictReader(handle)}  # later rows win


def table() -> None:
    rows = latest()
    say("| what | before | now | goal | met | measured (date, commit, load) |")
    say("|---|---|---|---|---|---|")
    for goal in GOALS:
        row = rows.get(goal.key)
        if row is None:
            say(f"| {goal.what} | {goal.before} | not measured | <= {goal.target:g} {goal.unit} | | |")
            continue
        value = float(row["value"])
        met = "yes" if value <= goal.target else "no"
        say(f"| {goal.what} | {goal.before} | {value:.3g} {row['unit']} | <= {goal.target:g} {goal.unit} | {met} | "
            f"{row['date']}, {row['commit']}, load {row['load_1min']} |")


def time_command(goal: str, command: list[str]) -> int:
    """Run ``command``, print and record its wall seconds as ``goal`` (only when it succeeds)."""
    load = os.getloadavg()[0]
    tick = time.perf_counter()
    code = subprocess.run(command, cwd=REPO).returncode
    seconds = time.perf_counter() - tick
    say(f"{goal}: {' '.join(command)} -> exit {code} in {seconds:.0f} s (load at the start {load:.2f}, "
        f"at the end {os.getloadavg()[0]:.2f})")
    if code == 0:
        record(goal, seconds, "s", " ".join(command))
    return code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command")
    timed = sub.add_parser("time", help="time a command and record it as a goal's measurement")
    timed.add_argument("goal", choices=["suite", "demo"])
    timed.add_argument("argv", nargs=argparse.REMAINDER, help="-- then the command")
    args = parser.parse_args()
    if args.command == "time":
        argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
        if not argv:
            parser.error("time: give the command after --")
        return time_command(args.goal, argv)
    table()
    return 0


if __name__ == "__main__":
    sys.exit(main())
