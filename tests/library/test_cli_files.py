"""The command line as users expect it (issue #27): --version, --json, several measures in one call, the
d_psi subcommand with probe files, help text with examples, progress on stderr, nothing but the result
on stdout, the output path checked before the work; and its readers fuzzed (hypothesis) with corrupt,
truncated, empty and wrong-shaped files of every accepted format: each ends with a result, or one
line on stderr naming the file and a non-zero exit.

In-process through cli.main (the console script's entry point), except where the real process matters
(stdout at the file-descriptor level).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import re
import subprocess
import sys
import tempfile
import zipfile
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import affine_homotopy as ah
from affine_homotopy import cli

N = 30
RNG = np.random.default_rng(3)
A = RNG.standard_normal((N, 4))
B = np.tanh(A @ RNG.standard_normal((4, 3))) + 0.1 * RNG.standard_normal((N, 3))
WEIGHT, BIAS = RNG.standard_normal((3, 2)), np.array([0.2, -0.1])


class LinearClassifier:
    """What joblib.dump writes of a fitted scikit-learn linear classifier: coef_ (C, D) and intercept_ (C,)."""

    def __init__(self, coef: np.ndarray, intercept: np.ndarray) -> None:
        self.coef_, self.intercept_ = coef, intercept


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("cli_files")
    np.save(folder / "a.npy", A)
    np.save(folder / "b.npy", B)
    np.save(folder / "zeros.npy", np.zeros((N, 3)))
    torch.save(torch.from_numpy(B).to(torch.bfloat16), folder / "b_bf16.pt")
    np.savez(folder / "probe.npz", weight=WEIGHT, bias=BIAS)
    linear = torch.nn.Linear(3, 2).double()
    with torch.no_grad():
        linear.weight.copy_(torch.from_numpy(WEIGHT.T))
        linear.bias.copy_(torch.from_numpy(BIAS))
    torch.save(linear.state_dict(), folder / "probe.pt")
    return folder


def run(folder: Path, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        patch.chdir(folder)
        try:
            status = cli.main(list(args))
        except SystemExit as exit_:  # argparse: --help, --version, usage errors
            status = int(exit_.code or 0)
    return status, out.getvalue(), err.getvalue()


def one_error_line(status: int, out: str, err: str) -> str:
    lines = err.strip().splitlines()
    assert status in (2, 3) and out == "" and len(lines) == 1, (status, out, err)
    assert lines[0].startswith("affine-homotopy: error: "), lines
    return lines[0]


def test_version_is_the_package_metadata(folder: Path) -> None:
    status, out, _ = run(folder, "--version")
    assert status == 0 and out.strip() == f"affine-homotopy {metadata.version('affine-homotopy')}"
    assert ah.__version__ == metadata.version("affine-homotopy")


def test_help_has_examples_and_no_markup(folder: Path) -> None:
    for args in ((), ("distance",), ("pairwise",), ("d_psi",)):
        status, out, _ = run(folder, *args, "--help")
        assert status == 0 and "``" not in out and ":func:" not in out, out
        assert "example" in out
    status, out, _ = run(folder, "distance", "--help")
    assert re.search(r"--dtype \{float64,float32\}\s+precision of the maths", out)
    assert re.search(r"--device DEVICE\s+where the maths runs", out)


def test_several_measures_and_json(folder: Path) -> None:
    status, out, err = run(folder, "distance", "a.npy", "b.npy", "--measure", "d_aff,cka", "--measure", "d_iso",
                           "--json")
    assert status == 0, err
    payload = json.loads(out)
    assert list(payload["measures"]) == ["d_aff", "cka", "d_iso"]
    d_aff = payload["measures"]["d_aff"]
    expected = ah.d_aff(A, B)
    assert d_aff["value"] == pytest.approx(expected.upper, rel=1e-12)
    assert d_aff["interval"] == pytest.approx([expected.lower, expected.upper], rel=1e-12)
    assert payload["measures"]["cka"]["value"] == pytest.approx(ah.cka(A, B), rel=1e-12)
    assert payload["settings"]["tol"] == 1e-3 and "mapped onto" in payload["convention"]
    status, out, err = run(folder, "distance", "a.npy", "b.npy", "--measure", "procrustes,d_aff")
    assert status == 0 and "procrustes: a mapped onto b" in out and "d_aff: a mapped onto b" in out


def test_pairwise_json_progress_and_one_file_per_measure(folder: Path, tmp_path: Path) -> None:
    out_path = str(tmp_path / "{measure}.csv")
    status, out, err = run(folder, "pairwise", "a.npy", "b.npy", "--measure", "d_aff,cka", "--out", out_path,
                           "--json", "--progress")
    assert status == 0, err
    payload = json.loads(out)
    tables = ah.pairwise([A, B], ["d_aff", "cka"], ["a", "b"])
    for measure in ("d_aff", "cka"):
        np.testing.assert_allclose(payload["tables"][measure], tables[measure].values, rtol=1e-12)
        assert (tmp_path / f"{measure}.csv").read_text().startswith("mapped_from,a,b\n")
    assert re.search(r"pairwise: 2/2 ordered pairs done, \d+ s elapsed", err), err
    status, out, err = run(folder, "pairwise", "a.npy", "b.npy", "--measure", "d_aff,cka", "--out", "t.csv")
    assert "put {measure} in the path" in one_error_line(status, out, err)


def test_the_output_path_is_checked_before_the_work(folder: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(ah.api, "pairwise", lambda *a, **k: pytest.fail("the work started"))
    for target, pattern in ((tmp_path, r"is a directory; give a file name"),
                            (tmp_path / "missing" / "t.csv", r"the directory .*missing does not exist")):
        line = one_error_line(*run(folder, "pairwise", "a.npy", "b.npy", "--out", str(target)))
        assert re.search(pattern, line), line


def test_d_psi_subcommand_reads_npz_pt_and_joblib_probes(folder: Path) -> None:
    expected = ah.d_psi(A, B, (WEIGHT, BIAS))
    for probe in ("probe.npz", "probe.pt"):
        status, out, err = run(folder, "d_psi", "a.npy", "b.npy", "--probe", probe, "--json")
        assert status == 0, err
        payload = json.loads(out)
        assert payload["value"] == pytest.approx(expected.value, rel=1e-9) and payload["certified"]
        assert payload["bound"] == pytest.approx(expected.bound, rel=1e-9)
    import joblib  # the [test] extra has it; scikit-learn is not needed to stand in for its classifier

    model = LinearClassifier(WEIGHT.T[1:] - WEIGHT.T[:1], BIAS[1:] - BIAS[:1])  # scikit-learn's binary layout
    joblib.dump(model, folder / "probe.joblib")
    status, out, err = run(folder, "d_psi", "a.npy", "b.npy", "--probe", "probe.joblib")
    assert status == 0 and "d_psi: a mapped onto b" in out, err
    assert float(re.search(r"d_psi\s+(\S+)", out)[1]) == pytest.approx(ah.d_psi(A, B, model).value, rel=1e-5)
    np.save(folder / "wide.npy", np.ones((4, 2)))
    np.savez(folder / "wrong.npz", weight=np.ones((4, 2)), bias=np.zeros(2))
    torch.save({"weight": torch.ones(2, 4), "bias": torch.zeros(2)}, folder / "wrong.pt")
    for probe, pattern in (("wrong.npz", r"probe weight has shape \(4, 2\)"),
                           ("wrong.pt", r"wrong\.pt: weight has shape \(2, 4\).*\(C, D_target\) = \(C, 3\)"),
                           ("a.npy", r"a\.npy: unknown file type '\.npy'"), ("none.npz", r"none\.npz: no such file")):
        line = one_error_line(*run(folder, "d_psi", "a.npy", "b.npy", "--probe", probe))
        assert re.search(pattern, line), line


def test_bfloat16_pt_is_upcast_with_a_note(folder: Path) -> None:
    status, out, err = run(folder, "distance", "a.npy", "b_bf16.pt", "--measure", "cka")
    assert status == 0, err
    assert re.fullmatch(r"affine-homotopy: note: b_bf16\.pt has dtype bfloat16; upcast to float64\..*\n", err), err
    rounded = torch.from_numpy(B).to(torch.bfloat16).to(torch.float64).numpy()
    assert float(re.search(r"cka\s+(\S+)", out)[1]) == pytest.approx(ah.cka(A, rounded), rel=1e-5)


def test_a_constant_file_is_a_one_line_error_not_nan(folder: Path) -> None:
    line = one_error_line(*run(folder, "distance", "zeros.npy", "b.npy", "--measure", "cka"))
    assert "zeros.npy: source is constant" in line and "cka is undefined" in line
    status, out, err = run(folder, "distance", "zeros.npy", "b.npy")  # d_aff: the ball's radius
    assert status == 0 and "nan" not in out.lower(), out


@pytest.mark.slow  # a fresh interpreter: the solver's own output at the file-descriptor level
def test_stdout_holds_only_the_result(folder: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "affine_homotopy", "d_psi", "a.npy", "b.npy", "--probe",
                             "probe.npz", "--json"], cwd=folder, capture_output=True, text=True, timeout=300,
                            env={"OMP_WAIT_POLICY": "PASSIVE", "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    assert "HiGHS" not in result.stdout and json.loads(result.stdout)["command"] == "d_psi"


# ---------------------------------------------------------------------------------------------
# the readers, fuzzed


def _valid_bytes(suffix: str, array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    if suffix == ".npy":
        np.save(buffer, array)
    elif suffix == ".npz":
        np.savez(buffer, x=array)
    else:
        torch.save(torch.from_numpy(np.ascontiguousarray(array)), buffer)
    return buffer.getvalue()


SHAPES = st.sampled_from([(N, 3), (N,), (), (2, N, 3), (1, 3), (N, 0), (0, 3), (N, 3, 1, 1)])
DTYPES = st.sampled_from(["float64", "float32", "float16", "int8", "bool", "complex64", "U3", "<f8"])


@st.composite
def damaged_files(draw: st.DrawFn) -> tuple[str, bytes]:
    suffix = draw(st.sampled_from([".npy", ".npz", ".pt", ".pth"]))
    shape, dtype = draw(SHAPES), draw(DTYPES)
    array = RNG.standard_normal(shape) if shape else np.float64(1.0)
    if dtype == "U3":
        array = np.asarray(array).astype("U3")
        if suffix in (".pt", ".pth"):
            suffix = ".npy"
    elif dtype == "complex64" and suffix in (".pt", ".pth"):
        array = np.asarray(array).astype(np.complex64)
    else:
        array = np.asarray(array).astype(dtype)
    data = _valid_bytes(suffix, np.asarray(array))
    damage = draw(st.sampled_from(["none", "truncate", "flip", "empty", "garbage", "append"]))
    if damage == "truncate":
        data = data[: draw(st.integers(0, max(0, len(data) - 1)))]
    elif damage == "flip":
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1 :]
    elif damage == "empty":
        data = b""
    elif damage == "garbage":
        data = draw(st.binary(min_size=1, max_size=64))
    elif damage == "append":
        data = data + draw(st.binary(min_size=1, max_size=32))
    return suffix, data


def _ends_well(status: int, out: str, err: str, name: str) -> None:
    if status == 0:
        values = [float(v) for v in re.findall(r"^\s+\w+\s+(\S+)\s+\(", out, re.M)]
        assert values and all(math.isfinite(v) for v in values), out
        return
    errors = "".join(line + "\n" for line in err.splitlines() if not line.startswith("affine-homotopy: note: "))
    line = one_error_line(status, out, errors)  # notes (an upcast input) may come first
    assert name in line, line
    assert "Traceback" not in err and "allow_pickle" not in line, line


@given(damaged_files(), st.sampled_from(["source", "target"]))
def test_fuzzed_representation_files(case, role) -> None:
    suffix, data = case
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        np.save(folder / "good.npy", B)
        (folder / f"fuzz{suffix}").write_bytes(data)
        files = [f"fuzz{suffix}", "good.npy"] if role == "source" else ["good.npy", f"fuzz{suffix}"]
        _ends_well(*run(folder, "distance", *files, "--measure", "cka"), f"fuzz{suffix}")


@st.composite
def damaged_probes(draw: st.DrawFn) -> tuple[str, bytes]:
    suffix = draw(st.sampled_from([".npz", ".pt", ".joblib"]))
    weight = RNG.standard_normal(draw(st.sampled_from([(3, 2), (2, 3), (3,), (3, 1), (3, 0), (2, 2, 2)])))
    bias = RNG.standard_normal(draw(st.sampled_from([(2,), (3,), (), (1,)])))
    buffer = io.BytesIO()
    if suffix == ".npz":
        keys = draw(st.sampled_from([("weight", "bias"), ("weight",), ("w", "b")]))
        np.savez(buffer, **dict(zip(keys, (weight, bias))))
    elif suffix == ".pt":
        torch.save({"weight": torch.from_numpy(weight.T.copy()), "bias": torch.from_numpy(bias)}, buffer)
    else:
        with zipfile.ZipFile(buffer, "w") as archive:  # not a joblib pickle at all
            archive.writestr("x", "y")
    data = buffer.getvalue()
    damage = draw(st.sampled_from(["none", "truncate", "garbage"]))
    if damage == "truncate":
        data = data[: draw(st.integers(0, max(0, len(data) - 1)))]
    elif damage == "garbage":
        data = draw(st.binary(max_size=40))
    return suffix, data


@given(damaged_probes())
def test_fuzzed_probe_files(case) -> None:
    suffix, data = case
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        np.save(folder / "a.npy", A)
        np.save(folder / "b.npy", B)
        (folder / f"probe{suffix}").write_bytes(data)
        status, out, err = run(folder, "d_psi", "a.npy", "b.npy", "--probe", f"probe{suffix}")
        if status == 0:
            assert math.isfinite(float(re.search(r"d_psi\s+(\S+)", out)[1]))
        else:
            line = one_error_line(status, out, err)
            assert "Traceback" not in err and ("probe" in line), line


def test_one_file_twice_gets_distinct_labels(folder: Path) -> None:
    """A file compared with itself needs no --names: its second label is ``a (2)``; --names still works."""
    status, out, _ = run(folder, "pairwise", "a.npy", "a.npy", "--measure", "cka")
    assert status == 0 and out.splitlines()[0].split()[-2:] == ["a", "(2)"], out
    status, out, _ = run(folder, "distance", "a.npy", "a.npy", "--measure", "d_aff,cka", "--json")
    payload = json.loads(out)
    assert status == 0 and payload["measures"]["d_aff"]["value"] <= 1e-9 and payload["measures"]["cka"]["value"] < 1e-9
    status, out, _ = run(folder, "distance", "a.npy", "a.npy")
    assert status == 0 and "d_aff: a mapped onto a (2)" in out, out
    status, out, _ = run(folder, "pairwise", "a.npy", "a.npy", "--measure", "cka", "--names", "first,second")
    assert status == 0 and "first" in out and "second" in out


def test_pairwise_warns_for_each_measure_that_misses_tol() -> None:
    from affine_homotopy.errors import ConvergenceWarning

    with pytest.warns(ConvergenceWarning, match=r"^d_lin: 2 of 2"):
        ah.pairwise([A, B + 3.0], ["d_lin"], max_iter=1)
