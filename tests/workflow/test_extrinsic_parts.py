"""An extrinsic job split by source (extrinsic.sources_per_job): which pairs a part computes, and how the
merge puts the parts' rows together (tests/workflow/test_workflow.py runs a split job end to end)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from affine_homotopy.jobs.extrinsic_parts import merge_diagnostics, merge_matrices, part_pairs
from affine_homotopy.study.validation import extrinsic_parts

NAMES = ["a", "b", "c", "d", "e"]


def test_the_parts_are_consecutive_blocks_of_the_encoders_and_cover_every_pair_once() -> None:
    config = {"encoders": dict.fromkeys(NAMES, {}), "extrinsic": {"sources_per_job": 2}}
    parts = extrinsic_parts(config)
    assert parts == [["a", "b"], ["c", "d"], ["e"]]
    assert extrinsic_parts({"encoders": dict.fromkeys(NAMES, {}), "extrinsic": {"sources_per_job": None}}) is None
    pairs = [pair for part in parts for pair in part_pairs(NAMES, part)]
    assert sorted(pairs) == [(i, j) for i in range(5) for j in range(5) if i != j]  # each once, no diagonal
    assert part_pairs(NAMES, ["d", "b"]) == [(1, j) for j in (0, 2, 3, 4)] + [(3, j) for j in (0, 1, 2, 4)]
    with pytest.raises(ValueError, match=r"sources \['z'\] are not among the encoders"):
        part_pairs(NAMES, ["z"])


def test_the_merge_takes_each_row_from_the_part_that_maps_from_it() -> None:
    rng = np.random.default_rng(0)
    full = rng.random((5, 5))
    np.fill_diagonal(full, 0.0)
    parts = []
    for sources in (["a", "b"], ["c", "d"], ["e"]):
        partial = np.full((5, 5), np.nan)  # what a part writes: its rows, the others empty
        rows = [NAMES.index(name) for name in sources]
        partial[rows] = full[rows]
        parts.append((sources, partial))
    np.testing.assert_array_equal(merge_matrices(NAMES, parts), full)
    with pytest.raises(ValueError, match=r"no part maps from \['e'\]"):
        merge_matrices(NAMES, parts[:2])
    with pytest.raises(ValueError, match=r"encoder 'c' is the source of parts 1 and 3"):
        merge_matrices(NAMES, [*parts, (["c"], full)])
    with pytest.raises(ValueError, match=r"part 0: a \(4, 4\) matrix, expected \(5, 5\)"):
        merge_matrices(NAMES, [(["a"], full[:4, :4])])


def test_the_merged_diagnostics_are_in_the_encoders_order() -> None:
    def rows(source: str) -> pd.DataFrame:
        targets = [name for name in NAMES if name != source]
        return pd.DataFrame({"mapped_from": source, "mapped_to": targets, "d_psi": np.arange(len(targets)) / 10})

    one_job = pd.concat([rows(name) for name in NAMES], ignore_index=True)
    shuffled = [pd.concat([rows("e")]), pd.concat([rows("c"), rows("d")]), pd.concat([rows("a"), rows("b")])]
    pd.testing.assert_frame_equal(merge_diagnostics(NAMES, shuffled), one_job)
    with pytest.raises(ValueError, match=r"name sources \['z'\]"):
        merge_diagnostics(NAMES, [rows("z")])
