"""The ``affine-homotopy`` command: the library's measures on representation files.

::

    affine-homotopy distance A.npy B.npy [--measure d_aff] [--tol 1e-3]     # A mapped onto B
    affine-homotopy pairwise a.npy b.npy c.npy [--measure d_aff] --out table.csv

Inputs are ``.npy``, ``.npz`` or ``.pt`` files holding an ``(N, D)`` array (rows = examples), or a
workflow embedding file ``(n_layers, N, D)`` with ``--layer``: a hidden-state index or a position
label (``layer6``) looked up in the file's JSON sidecar (``<file>.json``, as the workflow writes it),
or without a sidecar the slice index along the first axis. An ``.npz`` or ``.pt`` file with
several arrays needs ``FILE:KEY``. Bad input ends with one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .core.measures import SYMMETRIC  # measures that give the same value both ways (the registry)

PROG = "affine-homotopy"
SUFFIXES = (".npy", ".npz", ".pt", ".pth")


class InputError(Exception):
    """Bad command-line input: reported as one line, exit status 2."""


def _split_key(spec: str) -> tuple[Path, str | None]:
    for suffix in (".npz", ".pt", ".pth"):
        marker = suffix + ":"
        if marker in spec:
            path, key = spec.split(marker, 1)
            return Path(path + suffix), key
    return Path(spec), None


def _pick(arrays: dict[str, Any], key: str | None, path: Path) -> Any:
    if key is not None:
        if key not in arrays:
            raise InputError(f"{path}: no array named {key!r}; it holds {sorted(arrays)}")
        return arrays[key]
    if len(arrays) != 1:
        raise InputError(f"{path} holds {len(arrays)} arrays {sorted(arrays)}; choose one with {path}:KEY")
    return next(iter(arrays.values()))


def _read_array(path: Path, key: str | None) -> np.ndarray:
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if path.suffix not in SUFFIXES:
        raise InputError(f"{path}: unknown file type {path.suffix or '(none)'!r}; use {', '.join(SUFFIXES)}")
    try:
        if path.suffix == ".npy":
            return np.load(path, allow_pickle=False)
        if path.suffix == ".npz":
            with np.load(path, allow_pickle=False) as data:
                return np.asarray(_pick({k: data[k] for k in data.files}, key, path))
        import torch

        loaded = torch.load(path, map_location="cpu", weights_only=True)
        if isinstance(loaded, dict):
            tensors = {str(k): v for k, v in loaded.items() if isinstance(v, torch.Tensor)}
            if not tensors:
                raise InputError(f"{path} holds a dict without tensors (keys {sorted(map(str, loaded))})")
            loaded = _pick(tensors, key, path)
        if not isinstance(loaded, torch.Tensor):
            raise InputError(f"{path} holds a {type(loaded).__name__}, not a tensor")
        return loaded.detach().cpu().numpy()
    except InputError:
        raise
    # unreadable, corrupt or pickled (torch's weights_only load refuses other objects: UnpicklingError)
    except (OSError, ValueError, RuntimeError, EOFError, pickle.UnpicklingError) as error:
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise InputError(f"{path}: cannot read it as {path.suffix}: {message}") from None


def _sidecar(path: Path) -> dict[str, Any] | None:
    meta_path = path.with_suffix(".json")
    if not meta_path.is_file():
        return None
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, ValueError) as error:
        raise InputError(f"{meta_path}: unreadable sidecar: {error}") from None
    return meta if isinstance(meta, dict) and "layers" in meta else None


def load_representation(spec: str, layer: str | None = None) -> np.ndarray:
    """The (N, D) array named by ``spec`` (``FILE`` or ``FILE:KEY``), one layer of an (n_layers, N, D) file.

    Checked like the library's arguments (2-D, N >= 2, finite; integer or float16 upcast with a
    note), with the file named in any message.
    """
    from .api import as_representation

    return as_representation(spec, _layer_of(spec, layer))


def _layer_of(spec: str, layer: str | None) -> np.ndarray:
    path, key = _split_key(spec)
    array = _read_array(path, key)
    if array.ndim == 3:
        if layer is None:
            raise InputError(f"{path} has shape {array.shape} (n_layers, N, D); choose a layer with --layer")
        meta = _sidecar(path)
        position: int | str = int(layer) if layer.lstrip("-").isdigit() else layer
        if meta is not None:
            from .study.layers import slot_of

            try:
                slot = slot_of(meta, position)
            except (KeyError, ValueError) as error:
                raise InputError(f"{path}: --layer {layer}: {error.args[0] if error.args else error}") from None
        elif isinstance(position, int) and -array.shape[0] <= position < array.shape[0]:
            slot = position
        else:
            raise InputError(f"{path}: --layer {layer}: without a sidecar ({path.with_suffix('.json').name}) the layer "
                             f"is a slice index 0..{array.shape[0] - 1}")
        return np.asarray(array[slot])
    return array  # an (N, D) file is used as it is, also when --layer names a layer of the others


def _names(specs: Sequence[str], given: str | None) -> list[str]:
    if given is not None:
        names = [n.strip() for n in given.split(",")]
        if len(names) != len(specs) or len(set(names)) != len(names) or not all(names):
            raise InputError(f"--names {given!r}: need {len(specs)} distinct comma-separated names, one per file")
        return names
    stems = [_split_key(s)[0].stem + (f":{_split_key(s)[1]}" if _split_key(s)[1] else "") for s in specs]
    return stems if len(set(stems)) == len(stems) else list(specs)


def _distance(args: argparse.Namespace) -> None:
    from . import api

    x = load_representation(args.source, args.layer)
    y = load_representation(args.target, args.layer)
    api.check_same_examples([(args.source, x), (args.target, y)])
    source_name, target_name = _names([args.source, args.target], None)
    options = dict(rank_multiplier=args.rank_multiplier, dtype=args.dtype, device=args.device)
    if args.measure == "d_aff":
        result = api.d_aff(x, y, args.tol, args.max_iter, **options)
        state = "converged" if result.converged else "NOT converged: raise --max-iter"
        print(f"d_aff: {source_name} mapped onto {target_name} (source {args.source}, target {args.target}; "
              f"the paper's d_Aff(H={target_name}, G={source_name}))")
        print(f"  d_aff     {result.upper:.6g}  (upper bound, attained by an affine map)")
        print(f"  interval  [{result.lower:.6g}, {result.upper:.6g}]  relative gap {result.relative_gap:.2e}, "
              f"tol {args.tol:g}, {state} after {result.iterations} iterations")
        print(f"  N = {x.shape[0]}; source D = {x.shape[1]} (rank {result.source_rank}), "
              f"target D = {y.shape[1]} (rank {result.target_rank})")
        return
    if args.measure == "d_lin":
        value = api.d_lin(x, y, args.tol, args.max_iter, **options)
    else:
        names = [source_name, target_name] if source_name != target_name else ["source", "target"]
        value = api.pairwise([x, y], (args.measure,), names, args.tol, args.max_iter, **options)[args.measure].values[0, 1]
    note = "symmetric: the same both ways" if args.measure in SYMMETRIC else "not symmetric"
    print(f"{args.measure}: {source_name} mapped onto {target_name} (source {args.source}, target {args.target})")
    print(f"  {args.measure}  {value:.6g}  ({note}; a distance: 0 = the same up to the measure's maps)")
    print(f"  N = {x.shape[0]}; source D = {x.shape[1]}, target D = {y.shape[1]}")


def _pairwise(args: argparse.Namespace) -> None:
    from . import api

    if len(args.files) < 2:
        raise InputError(f"pairwise needs at least 2 files, got {len(args.files)}")
    names = _names(args.files, args.names)
    arrays = [load_representation(spec, args.layer) for spec in args.files]
    api.check_same_examples(list(zip(args.files, arrays)))
    tables = api.pairwise(arrays, (args.measure,), names, args.tol, args.max_iter, rank_multiplier=args.rank_multiplier,
                          dtype=args.dtype, device=args.device)
    table = tables[args.measure]
    print(table)
    if args.out:
        table.to_csv(args.out)
        print(f"wrote {args.out}: {len(names)} x {len(names)} {args.measure}, row mapped onto column")


def parser() -> argparse.ArgumentParser:
    from .core.measures import INTRINSIC_MEASURES as MEASURES

    top = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0],
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = top.add_subparsers(dest="command", required=True)

    def common(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--measure", default="d_aff", choices=MEASURES, metavar="MEASURE",
                         help=f"one of {', '.join(MEASURES)} (default d_aff)")
        sub.add_argument("--layer", help="layer of every (n_layers, N, D) file: hidden-state index or label (layer6) "
                         "from its sidecar, else the slice index; (N, D) files are used as they are")
        sub.add_argument("--tol", type=float, default=1e-3, help="d_aff/d_lin: certified relative gap (default 1e-3)")
        sub.add_argument("--max-iter", type=int, default=1000, help="d_aff/d_lin: iterations at most (default 1000)")
        sub.add_argument("--rank-multiplier", type=float, default=5.0, help="n of the rank rule (default 5)")
        sub.add_argument("--dtype", default="float64", choices=("float64", "float32"))
        sub.add_argument("--device", default="cpu", choices=("cpu", "cuda", "auto"))

    distance = commands.add_parser("distance", help="one measure of A mapped onto B",
                                   description="One measure of SOURCE mapped onto TARGET (d_aff: the certified interval).")
    distance.add_argument("source", help="the representations mapped from (FILE or FILE:KEY)")
    distance.add_argument("target", help="the representations mapped onto")
    common(distance)
    distance.set_defaults(run=_distance)

    table = commands.add_parser("pairwise", help="the K x K table of one measure",
                                description="The K x K table of one measure: row i mapped onto column j.")
    table.add_argument("files", nargs="+", help="K >= 2 representation files")
    table.add_argument("--out", help="write the table as CSV (header mapped_from,<names>)")
    table.add_argument("--names", help="comma-separated row/column names (default: the file names)")
    common(table)
    table.set_defaults(run=_pairwise)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)

    def note(message: Any, category: type[Warning], *_: Any, **__: Any) -> None:
        print(f"{PROG}: note: {message}", file=sys.stderr)

    with warnings.catch_warnings():
        warnings.showwarning = note  # warnings (an upcast input, a missed tol) as one line each
        try:
            args.run(args)
        except (InputError, ValueError, OSError) as error:
            print(f"{PROG}: error: {error}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
