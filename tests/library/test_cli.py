"""The ``affine-homotopy`` command line, run as a subprocess: its numbers are the library's, its
direction is "first file mapped onto the second", and bad input ends with one line and status 2."""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import affine_homotopy as ah
from affine_homotopy import cli

N = 80


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "affine_homotopy", *args], cwd=cwd, capture_output=True, text=True,
                          env={"OMP_WAIT_POLICY": "PASSIVE", "PATH": "/usr/bin:/bin"}, timeout=300)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, np.ndarray]]:
    folder = tmp_path_factory.mktemp("cli")
    rng = np.random.default_rng(11)
    a = rng.standard_normal((N, 8)).astype(np.float32)
    b = np.tanh(a @ rng.standard_normal((8, 5))).astype(np.float32)
    c = (a[:, :3] @ rng.standard_normal((3, 4))).astype(np.float32)
    np.save(folder / "a.npy", a)
    np.savez(folder / "b.npz", embeddings=b)
    torch.save({"c": torch.from_numpy(c)}, folder / "c.pt")
    # a workflow embedding file: (n_layers, N, D) with its sidecar naming hidden-state indices 2 and 5
    np.save(folder / "train.npy", np.stack([a[:, :5], b]))
    (folder / "train.json").write_text(json.dumps({"layers": [2, 5], "N": N, "D": 5}))
    np.save(folder / "plain_stack.npy", np.stack([a[:, :5], b]))  # no sidecar: the slice index
    return folder, {"a": a, "b": b, "c": c}


@pytest.mark.slow  # two interpreters started: over 10 s on a busy machine
def test_distance_prints_the_interval_and_the_direction(files) -> None:
    folder, arrays = files
    result = run_cli("distance", "a.npy", "b.npz", "--tol", "1e-4", cwd=folder)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "d_aff: a mapped onto b" in out and "d_Aff(H=b, G=a)" in out
    expected = ah.d_aff(arrays["a"], arrays["b"], tol=1e-4)
    value = float(re.search(r"d_aff\s+(\S+)\s+\(upper bound", out)[1])
    lower, upper = map(float, re.search(r"interval\s+\[(\S+), (\S+)\]", out).groups())
    assert value == pytest.approx(expected.upper, rel=1e-5) and upper == value
    assert lower == pytest.approx(expected.lower, rel=1e-5) and f"after {expected.iterations} iterations" in out
    assert "converged" in out and "NOT" not in out
    other = run_cli("distance", "c.pt", "a.npy", "--measure", "cka", cwd=folder)
    assert other.returncode == 0, other.stderr
    assert "cka: c mapped onto a" in other.stdout and "symmetric" in other.stdout
    cka = float(re.search(r"cka\s+(\S+)\s+\(", other.stdout)[1])
    assert cka == pytest.approx(ah.cka(arrays["c"], arrays["a"]), rel=1e-5)


def test_pairwise_writes_the_labelled_table(files) -> None:
    folder, arrays = files
    result = run_cli("pairwise", "a.npy", "b.npz", "c.pt", "--out", "table.csv", cwd=folder)
    assert result.returncode == 0, result.stderr
    assert "wrote table.csv: 3 x 3 d_aff, row mapped onto column" in result.stdout
    with open(folder / "table.csv", newline="") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == ["mapped_from", "a", "b", "c"] and [r[0] for r in rows[1:]] == ["a", "b", "c"]
    written = np.array([[float(v) for v in r[1:]] for r in rows[1:]])
    expected = ah.pairwise([arrays["a"], arrays["b"], arrays["c"]], names=["a", "b", "c"])["d_aff"].values
    np.testing.assert_allclose(written, expected, rtol=1e-8, atol=1e-12)
    assert written[0, 2] < 1e-6 * written[2, 0]  # a (rank 8) maps exactly onto its rank-3 image c


def test_layers_of_a_workflow_file(files) -> None:
    folder, arrays = files
    by_index = cli.load_representation(str(folder / "train.npy"), "5")
    by_label = cli.load_representation(str(folder / "train.npy"), "layer2")
    np.testing.assert_array_equal(by_index, arrays["b"])
    np.testing.assert_array_equal(by_label, arrays["a"][:, :5])
    np.testing.assert_array_equal(cli.load_representation(str(folder / "plain_stack.npy"), "1"), arrays["b"])
    result = run_cli("distance", "train.npy", "a.npy", "--layer", "layer5", "--measure", "procrustes", cwd=folder)
    assert result.returncode == 0, result.stderr
    value = float(re.search(r"procrustes\s+(\S+)\s+\(", result.stdout)[1])
    assert value == pytest.approx(ah.procrustes(arrays["b"], arrays["a"]), rel=1e-5)


@pytest.mark.slow  # three interpreters started: over 10 s on a busy machine
def test_bad_input_gets_one_line_and_status_2(files) -> None:
    folder, arrays = files
    np.save(folder / "flat.npy", arrays["a"][:, 0])
    np.save(folder / "one.npy", arrays["a"][:1])
    np.save(folder / "short.npy", arrays["a"][:50])
    broken = arrays["a"].copy()
    broken[7, 2] = np.nan
    np.save(folder / "nan.npy", broken)
    (folder / "junk.npy").write_bytes(b"not an array")
    cases = {
        ("distance", "missing.npy", "a.npy"): r"missing\.npy: no such file",
        ("distance", "junk.npy", "a.npy"): r"junk\.npy: not a \.npy file \(it does not start with numpy's",
        ("distance", "flat.npy", "a.npy"): r"flat\.npy must be a 2-D \(N, D\) array, got shape \(80,\)",
        ("distance", "one.npy", "a.npy"): r"one\.npy has N = 1 example",
        ("distance", "nan.npy", "a.npy"): r"nan\.npy \(shape \(80, 8\)\) holds 1 NaN/inf value.*row 7",
        ("distance", "short.npy", "a.npy"): r"same N examples.*short\.npy \(50, 8\), a\.npy \(80, 8\)",
        ("distance", "train.npy", "a.npy"): r"train\.npy has shape \(2, 80, 5\) \(n_layers, N, D\); choose a layer",
        ("distance", "train.npy", "a.npy", "--layer", "7"): r"train\.npy: --layer 7: .*layers \[2, 5\]",
        ("distance", "a.npy", "b.npz", "--tol", "0"): r"tol must be a positive number",
        ("pairwise", "a.npy"): r"at least 2 files",
    }
    # two of them through the real entry point, the rest in-process (same code path, no interpreter start)
    for args in [("distance", "missing.npy", "a.npy"), ("distance", "nan.npy", "a.npy")]:
        result = run_cli(*args, cwd=folder)
        assert result.returncode == 2 and result.stdout == ""
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert re.search(cases[args], result.stderr), result.stderr
    for args, pattern in cases.items():
        with pytest.MonkeyPatch.context() as patch:
            patch.chdir(folder)
            err = io.StringIO()
            patch.setattr(sys, "stderr", err)
            assert cli.main(list(args)) == 2, args
        lines = err.getvalue().strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("affine-homotopy: error: "), (args, lines)
        assert re.search(pattern, lines[0]), (args, lines[0])
    unknown = run_cli("distance", "a.npy", "b.npz", "--measure", "d_affine", cwd=folder)
    assert unknown.returncode == 2 and "--measure 'd_affine': unknown measure(s) ['d_affine']" in unknown.stderr


def test_integer_input_is_upcast_with_a_one_line_note(files, capsys) -> None:
    folder, arrays = files
    np.save(folder / "counts.npy", np.rint(arrays["a"] * 10).astype(np.int32))
    assert cli.main(["distance", str(folder / "counts.npy"), str(folder / "a.npy"), "--measure", "cka"]) == 0
    captured = capsys.readouterr()
    assert re.fullmatch(r"affine-homotopy: note: \S*counts\.npy has dtype int32; upcast to float64\.\n", captured.err)


def test_distance_gives_the_certified_interval_of_d_aff_rel(files, capsys) -> None:
    folder, arrays = files
    assert cli.main(["distance", str(folder / "a.npy"), str(folder / "b.npz"), "--measure", "d_aff_rel", "--json"]) == 0
    entry = json.loads(capsys.readouterr().out)["measures"]["d_aff_rel"]
    expected = ah.d_aff_rel(arrays["a"], arrays["b"])
    assert entry["interval"] == pytest.approx([expected.lower, expected.upper], rel=1e-12)
    assert entry["value"] == entry["interval"][1] and 0 <= entry["interval"][0] <= entry["value"] <= 1
