"""The ``affine-homotopy`` command: the library's measures on representation files.

Subcommands: ``distance`` (measures of SOURCE mapped onto TARGET), ``pairwise`` (the K x K tables of
K files) and ``d_psi`` (SOURCE mapped onto TARGET through a classifier of TARGET). Files and probes:
:mod:`affine_homotopy.cli.files`. stdout carries only the result (text, or JSON with ``--json``);
notes, progress and the solvers' own output go to stderr. Bad input ends with one line on stderr
and exit status 2, a value that cannot be computed with status 3. An error names the option or file
it is about, read from the library error's ``argument`` field (:mod:`affine_homotopy.errors`), never
from its text. Rows and columns are labelled by file name; a file given twice gets ``name (2)``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import time
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

from .files import InputError, check_output, load_representation, read_probe, split_key

PROG = "affine-homotopy"
DESCRIPTION = """\
Distances between language encoders' representations (Chan et al., "On Affine Homotopy between
Language Encoders", NeurIPS 2024): the certified affine distance d_aff, its relatives and the
representation-similarity baselines, on .npy, .npz and .pt files holding (N, D) arrays (rows =
examples, the same examples in every file)."""
EXAMPLES = """\
examples:
  affine-homotopy distance A.npy B.npy                   # d_aff of A mapped onto B, certified interval
  affine-homotopy distance A.npy B.npy --measure d_aff,cka,procrustes --json
  affine-homotopy pairwise a.npy b.npz c.pt --measure d_aff --out table.csv
  affine-homotopy pairwise a.npy b.npy --measure d_aff --measure cka --out 'tables/{measure}.csv'
  affine-homotopy d_psi A.npy B.npy --probe probe_of_B.npz
  affine-homotopy distance train.npy other.npy --layer layer6   # one layer of a workflow embedding file

direction: the first file is mapped onto the second (d_aff(source=G, target=H) is the paper's d_Aff(H, G));
in a table, cell (i, j) is row i mapped onto column j. Labels are the file names (a file given twice:
A and A (2)). Exit status: 0 done, 2 bad input, 3 a value that cannot be computed."""


def _version() -> str:
    from .. import __version__

    return __version__


# ---------------------------------------------------------------------------------------------
# stdout carries the result only


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Everything written to stdout inside (Python prints, and C libraries' output such as HiGHS's
    banner, at the file-descriptor level) goes to stderr."""
    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:
        saved = None
    if saved is not None:
        os.dup2(2, 1)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        _flush_c_stdio()
        if saved is not None:
            os.dup2(saved, 1)
            os.close(saved)


def _flush_c_stdio() -> None:
    try:
        import ctypes

        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError, TypeError):
        pass


class _Failure(Exception):
    """A NaN (or inf) that would be printed: exit status 3."""


def _finite(name: str, value: float) -> float:
    if not math.isfinite(value):
        raise _Failure(f"{name} came out as {value}: not a number the command can report")
    return value


# ---------------------------------------------------------------------------------------------
# options


def _measure_list(values: list[str] | None) -> tuple[str, ...]:
    from ..core.measures import INTRINSIC_MEASURES as MEASURES

    chosen = [m.strip() for value in (values or ["d_aff"]) for m in value.split(",") if m.strip()]
    unknown = [m for m in chosen if m not in MEASURES]
    if unknown or not chosen:
        raise InputError(f"--measure {','.join(values or [])!r}: unknown measure(s) {unknown}; choose from "
                         f"{', '.join(MEASURES)}")
    return tuple(dict.fromkeys(chosen))


def _settings(args: argparse.Namespace, iterative: bool = True) -> dict[str, Any]:
    settings: dict[str, Any] = dict(rank_multiplier=args.rank_multiplier, dtype=args.dtype, device=args.device)
    if iterative:
        settings.update(tol=args.tol, max_iter=args.max_iter)
    return settings


def _names(specs: Sequence[str], given: str | None) -> list[str]:
    """``--names``, else each file's stem (the full spec where stems collide); the k-th repeat of a label
    becomes ``label (k)``, so a file compared with itself needs no ``--names``."""
    if given is not None:
        names = [n.strip() for n in given.split(",")]
        if len(names) != len(specs) or len(set(names)) != len(names) or not all(names):
            raise InputError(f"--names {given!r}: need {len(specs)} distinct comma-separated names, one per file")
        return names
    stems = [split_key(s)[0].stem + (f":{split_key(s)[1]}" if split_key(s)[1] else "") for s in specs]
    labels = stems if len(set(stems)) == len(set(specs)) else list(specs)
    seen: dict[str, int] = {}
    for k, label in enumerate(labels):
        seen[label] = seen.get(label, 0) + 1
        labels[k] = label if seen[label] == 1 else f"{label} ({seen[label]})"
    return labels


def _print_json(payload: dict[str, Any]) -> None:
    print(json.dumps(payload, indent=2, allow_nan=False))


# ---------------------------------------------------------------------------------------------
# the subcommands


def _pair_inputs(args: argparse.Namespace) -> tuple[Any, Any, str, str]:
    from ..api.inputs import check_same_examples

    x = load_representation(args.source, args.layer)
    y = load_representation(args.target, args.layer)
    check_same_examples([(args.source, x), (args.target, y)])
    source_name, target_name = _names([args.source, args.target], None)
    return x, y, source_name, target_name


def _distance(args: argparse.Namespace) -> None:
    from .. import api
    from ..core.measures import SYMMETRIC

    measures = _measure_list(args.measure)
    x, y, source_name, target_name = _pair_inputs(args)
    settings = _settings(args)
    with _stdout_to_stderr():
        values = api.distances(x, y, measures, **settings)
    result = values.get("d_aff")
    entries: dict[str, dict[str, Any]] = {}
    for measure in measures:
        if measure == "d_aff":
            entries[measure] = {"value": _finite("d_aff", result.upper), "interval": [result.lower, result.upper],
                                "relative_gap": result.relative_gap, "converged": result.converged,
                                "iterations": result.iterations, "source_rank": result.source_rank,
                                "target_rank": result.target_rank}
        else:
            entries[measure] = {"value": _finite(measure, float(values[measure])), "symmetric": measure in SYMMETRIC}
            if isinstance(values[measure], api.Interval):  # d_aff_rel, d_lin: certified
                entries[measure]["interval"] = [values[measure].lower, values[measure].upper]
    if args.json:
        _print_json({"command": "distance", "source": args.source, "target": args.target,
                     "convention": "source mapped onto target; d_aff(source=G, target=H) is the paper's d_Aff(H, G)",
                     "n": int(x.shape[0]), "source_dim": int(x.shape[1]), "target_dim": int(y.shape[1]),
                     "measures": entries, "settings": {**settings, "layer": args.layer}, "version": _version()})
        return
    for measure, entry in entries.items():
        if measure == "d_aff":
            _print_d_aff(args, result, source_name, target_name, x, y)
        else:
            symmetric = entry["symmetric"] or (measure == "d_iso" and x.shape[1] == y.shape[1])
            note = "symmetric: the same both ways" if symmetric else "not symmetric"
            kinds = {"psi_norm": "the spectral norm of the linear part of the map attaining d_aff",
                     "d_aff_rel": "d_aff over the target's enclosing radius: 0 = an exact affine map, 1 = no "
                                  "better than a constant"}
            kind = kinds.get(measure, "a distance: 0 = the same up to the measure's maps")
            print(f"{measure}: {source_name} mapped onto {target_name} (source {args.source}, target {args.target})")
            print(f"  {measure}  {entry['value']:.6g}  ({note}; {kind})")
            if "interval" in entry:
                print(f"  interval  [{entry['interval'][0]:.6g}, {entry['interval'][1]:.6g}]  (certified)")
            print(f"  N = {x.shape[0]}; source D = {x.shape[1]}, target D = {y.shape[1]}")


def _print_d_aff(args: argparse.Namespace, result: Any, source_name: str, target_name: str, x: Any, y: Any) -> None:
    state = "converged" if result.converged else "NOT converged: raise --max-iter"
    print(f"d_aff: {source_name} mapped onto {target_name} (source {args.source}, target {args.target}; "
          f"the paper's d_Aff(H={target_name}, G={source_name}))")
    print(f"  d_aff     {result.upper:.6g}  (upper bound, attained by an affine map)")
    print(f"  interval  [{result.lower:.6g}, {result.upper:.6g}]  relative gap {result.relative_gap:.2e}, "
          f"tol {args.tol:g}, {state} after {result.iterations} iterations")
    print(f"  N = {x.shape[0]}; source D = {x.shape[1]} (rank {result.source_rank}), "
          f"target D = {y.shape[1]} (rank {result.target_rank})")


def _outputs(out: str | None, measures: Sequence[str]) -> dict[str, Any]:
    """The CSV path of each measure, checked before any work."""
    if out is None:
        return {}
    if len(measures) > 1 and "{measure}" not in out:
        raise InputError(f"--out {out}: {len(measures)} measures need one file each; put {{measure}} in the path, "
                         "e.g. --out 'tables/{measure}.csv'")
    return {m: check_output(out.replace("{measure}", m)) for m in measures}


def _pairwise(args: argparse.Namespace) -> None:
    from .. import api
    from ..api.inputs import check_same_examples

    if len(args.files) < 2:
        raise InputError(f"pairwise needs at least 2 files, got {len(args.files)}")
    measures = _measure_list(args.measure)
    outputs = _outputs(args.out, measures)
    names = _names(args.files, args.names)
    arrays = [load_representation(spec, args.layer) for spec in args.files]
    check_same_examples(list(zip(args.files, arrays)))
    progress = args.progress if args.progress is not None else sys.stderr.isatty()
    with _stdout_to_stderr():
        tables = api.pairwise(arrays, measures, names, **_settings(args), progress=progress)
    for measure, table in tables.items():
        for value in table.values.flat:
            _finite(measure, float(value))
    for measure, path in outputs.items():
        tables[measure].to_csv(path)
    if args.json:
        _print_json({"command": "pairwise", "files": list(args.files), "names": names,
                     "convention": "values[i][j]: row i mapped onto column j",
                     "tables": {m: t.values.tolist() for m, t in tables.items()},
                     "written": {m: str(p) for m, p in outputs.items()},
                     "settings": {**_settings(args), "layer": args.layer}, "version": _version()})
        return
    for measure, table in tables.items():
        print(table)
    for measure, path in outputs.items():
        print(f"wrote {path}: {len(names)} x {len(names)} {measure}, row mapped onto column")


def _d_psi(args: argparse.Namespace) -> None:
    from .. import api

    x, y, source_name, target_name = _pair_inputs(args)
    probe = read_probe(args.probe, int(y.shape[1]))
    with _stdout_to_stderr():
        result = api.d_psi(x, y, probe, inverse_temperature=args.inverse_temperature, **_settings(args))
    value, bound = _finite("d_psi", result.value), _finite("bound", result.bound)
    if args.json:
        _print_json({"command": "d_psi", "source": args.source, "target": args.target, "probe": args.probe,
                     "convention": "source mapped onto target through the target's probe",
                     "value": value, "interval": [result.lower if result.certified else None, value],
                     "certified": result.certified,
                     "bound": bound, "d_aff": result.d_aff.upper, "winning_start": result.winning_start,
                     "settings": {**_settings(args), "inverse_temperature": args.inverse_temperature,
                                  "layer": args.layer}, "version": _version()})
        return
    within = "" if result.interval.within_tol else f", wider than tol: {result.interval.stop}"
    certificate = (f"certified interval [{result.lower:.6g}, {value:.6g}]{within}" if result.certified
                   else "an upper bound (no certificate)")
    print(f"d_psi: {source_name} mapped onto {target_name} through the probe {args.probe}")
    print(f"  d_psi     {value:.6g}  ({certificate}; in [0, sqrt 2])")
    print(f"  bound     {bound:.6g}  (Lemma 5.2: inverse_temperature / 2 x ||W||_2 x d_aff)")
    print(f"  d_aff     {result.d_aff.upper:.6g}  (the affine map the search starts from)")


# ---------------------------------------------------------------------------------------------
# the parser


def _common(sub: argparse.ArgumentParser, measures: bool = True) -> None:
    from ..core.measures import INTRINSIC_MEASURES as MEASURES

    if measures:
        sub.add_argument("--measure", action="append", metavar="MEASURE",
                         help=f"measure(s): repeat the option or separate by commas; from {', '.join(MEASURES)} "
                              "(default d_aff)")
    sub.add_argument("--layer", help="layer of every (n_layers, N, D) file: hidden-state index or label (layer6) "
                     "from its sidecar, else the slice index; (N, D) files are used as they are")
    sub.add_argument("--tol", type=float, default=1e-3, help="d_aff/d_aff_rel/d_lin: certified relative gap "
                     "(default 1e-3)")
    sub.add_argument("--max-iter", type=int, default=1000, help="d_aff/d_aff_rel/d_lin: iterations at most "
                     "(default 1000)")
    sub.add_argument("--rank-multiplier", type=float, default=5.0, help="n of the rank rule (default 5)")
    sub.add_argument("--dtype", default="float64", choices=("float64", "float32"),
                     help="precision of the maths (default float64)")
    sub.add_argument("--device", default="cpu", help="where the maths runs: cpu (default), cuda, cuda:INDEX or auto "
                     "(CUDA when visible)")
    sub.add_argument("--json", action="store_true", help="print the result as JSON (values, intervals, the "
                     "direction convention and the settings)")


def parser() -> argparse.ArgumentParser:
    formatter = argparse.RawDescriptionHelpFormatter
    top = argparse.ArgumentParser(prog=PROG, description=DESCRIPTION, epilog=EXAMPLES, formatter_class=formatter)
    top.add_argument("--version", action="version", version=f"{PROG} {_version()}")
    commands = top.add_subparsers(dest="command", required=True, metavar="{distance,pairwise,d_psi}")
    distance = commands.add_parser(
        "distance", help="measures of SOURCE mapped onto TARGET", formatter_class=formatter,
        description="Measures of SOURCE mapped onto TARGET (d_aff: the certified interval).",
        epilog="example:\n  affine-homotopy distance A.npy B.npy --measure d_aff,cka --json")
    distance.add_argument("source", help="the representations mapped from (FILE or FILE:KEY)")
    distance.add_argument("target", help="the representations mapped onto")
    _common(distance)
    distance.set_defaults(run=_distance)
    table = commands.add_parser(
        "pairwise", help="the K x K tables of K files", formatter_class=formatter,
        description="The K x K table of each measure: row i mapped onto column j.",
        epilog="example:\n  affine-homotopy pairwise a.npy b.npy c.npy --measure d_aff,cka --out 'tables/{measure}.csv'")
    table.add_argument("files", nargs="+", help="K >= 2 representation files (FILE or FILE:KEY)")
    table.add_argument("--out", help="write each table as CSV (header mapped_from,<names>); with several measures "
                       "the path holds {measure}")
    table.add_argument("--names", help="comma-separated row/column names (default: the file names)")
    table.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                       help="one line per source encoder on stderr: pairs done, time left (default: when stderr "
                            "is a terminal)")
    _common(table)
    table.set_defaults(run=_pairwise)
    psi = commands.add_parser(
        "d_psi", help="SOURCE mapped onto TARGET through a classifier of TARGET", formatter_class=formatter,
        description="d_psi (the paper's Eq. 20): how well an affine map of SOURCE reproduces the class "
                    "probabilities a fixed linear classifier gives on TARGET; with Lemma 5.2's bound.",
        epilog="probe files:\n  .npz      arrays weight (D_target, C) and bias (C,): logits = target @ weight + bias\n"
               "  .pt/.pth  torch.save(linear.state_dict(), FILE) of a torch.nn.Linear(D_target, C)\n"
               "  .joblib   a scikit-learn linear classifier saved with joblib.dump (load only files you trust)\n"
               "example:\n  affine-homotopy d_psi A.npy B.npy --probe probe.npz --inverse-temperature 1")
    psi.add_argument("source", help="the representations mapped from (FILE or FILE:KEY)")
    psi.add_argument("target", help="the representations mapped onto, which the probe classifies")
    psi.add_argument("--probe", required=True, help="the target's classifier: .npz, .pt/.pth or .joblib (below)")
    psi.add_argument("--inverse-temperature", type=float, default=1.0,
                     help="probabilities softmax(lam * logits) (default 1)")
    _common(psi, measures=False)
    psi.set_defaults(run=_d_psi)
    return top


# the library's argument names, as the command's options
FLAGS = {"tol": "--tol", "max_iter": "--max-iter", "rank_multiplier": "--rank-multiplier", "dtype": "--dtype",
         "device": "--device", "inverse_temperature": "--inverse-temperature"}


def _message(error: BaseException, args: argparse.Namespace) -> str:
    """The error's text, led by the option or file its ``argument`` field names (the library's ``source``
    and ``target`` are the command's files)."""
    argument = getattr(error, "argument", None)
    files = {role: getattr(args, role, None) for role in ("source", "target")}
    if argument in FLAGS:
        return f"{FLAGS[argument]}: {error}"
    if files.get(argument):
        return f"{files[argument]}: {error}"
    return str(error)


def main(argv: Sequence[str] | None = None) -> int:
    from ..errors import AffineHomotopyError, NumericalError

    args = parser().parse_args(argv)

    def note(message: Any, category: type[Warning], *_: Any, **__: Any) -> None:
        print(f"{PROG}: note: {message}", file=sys.stderr)

    started = time.monotonic()
    with warnings.catch_warnings():
        warnings.showwarning = note  # warnings (an upcast input, a missed tol) as one line each
        try:
            args.run(args)
        except (NumericalError, _Failure) as error:
            print(f"{PROG}: error: {_message(error, args)}", file=sys.stderr)
            return 3
        except (InputError, AffineHomotopyError, ValueError, OSError) as error:
            print(f"{PROG}: error: {_message(error, args)}", file=sys.stderr)
            return 2
    if getattr(args, "progress", None):
        print(f"{PROG}: done in {time.monotonic() - started:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
