"""The benchmark suites' one entry point: ``python -m benchmarks <suite> [options]``.

Each suite is a module of this package with a ``main(argv)``; ``python -m benchmarks <suite> --help``
lists its options. Suites print their side-by-side ratios with the data, sizes, dtype, device and
thread counts beside them; nothing is written into the repository.
"""

from __future__ import annotations

import importlib
import sys

SUITES = {
    "intrinsic": "the all-pairs intrinsic engine against a naive per-pair loop, and d_aff against the paper's SGD",
    "extrinsic": "CPU seconds per pair of d_psi, d_worst and d_worst_search; or per job of a finished run",
    "embedding": "examples per second of a config's model encoders, and its embed stage at that rate",
    "multiclass": "the multi-class certificate's gap (by cause) and CPU beside the local search, on a real 3-class task",
    "device": "GPU against CPU per stage (d_aff, the extrinsic measures, embedding); the CPU side alone without CUDA",
    "startup": "each workflow script's start-up (interpreter and imports) against a bare interpreter",
    "compare": "whether two finished runs' results are bit-identical, file by file",
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in SUITES:
        width = max(map(len, SUITES))
        listing = "\n".join(f"  {name:<{width}}  {about}" for name, about in SUITES.items())
        print(f"usage: python -m benchmarks <suite> [options]   (<suite> --help for its options)\n\nsuites:\n{listing}")
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    suite = importlib.import_module(f"benchmarks.{argv[0]}")
    return int(suite.main(argv[1:]) or 0)


if __name__ == "__main__":
    sys.exit(main())
