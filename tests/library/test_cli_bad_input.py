"""The command line's branches that tests/library/test_cli.py leaves out: FILE:KEY and files holding several
arrays, an unknown suffix, a .pt file holding something other than a tensor, an unreadable sidecar,
errors in --names, and the output for a result that did not converge.

Run in-process through cli.main (the console script's entry point) on files written here; the
numbers are compared with the library's on the same arrays.
"""

from __future__ import annotations

import fractions
import re
from pathlib import Path

import numpy as np
import pytest
import torch

import affine_homotopy as ah
from affine_homotopy import cli

N = 40


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("cli_bad")
    rng = np.random.default_rng(5)
    x = rng.standard_normal((N, 4))
    y = np.tanh(x @ rng.standard_normal((4, 3)))
    np.save(folder / "x.npy", x)
    np.save(folder / "y.npy", y)
    np.savez(folder / "two.npz", first=x, second=y)
    torch.save({"first": torch.from_numpy(x), "second": torch.from_numpy(y), "step": 3}, folder / "two.pt")
    torch.save(torch.from_numpy(y), folder / "y.pth")
    torch.save([torch.from_numpy(x)], folder / "list.pt")
    torch.save({"step": 3, "name": "probe"}, folder / "no_tensors.pt")
    torch.save(fractions.Fraction(1, 2), folder / "pickled.pt")  # refused by torch's weights_only load
    np.savetxt(folder / "x.csv", x, delimiter=",")
    np.save(folder / "noext", x)  # numpy appends .npy: rename it to have no suffix
    (folder / "noext.npy").rename(folder / "noext")
    np.save(folder / "stack.npy", np.stack([x[:, :3], y]))
    (folder / "stack.json").write_text("{not json")
    return folder


def run(folder: Path, capsys, *args: str) -> tuple[int, str, str]:
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        status = cli.main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def error_line(folder: Path, capsys, *args: str) -> str:
    status, out, err = run(folder, capsys, *args)
    lines = err.strip().splitlines()
    assert status == 2 and out == "" and len(lines) == 1, (args, status, out, err)
    assert lines[0].startswith("affine-homotopy: error: "), lines
    return lines[0]


def printed_d_aff(out: str) -> float:
    return float(re.search(r"d_aff\s+(\S+)\s+\(upper bound", out)[1])


@pytest.mark.parametrize("spec,expected", [("two.npz:first", "x"), ("two.npz:second", "y"), ("two.pt:first", "x"),
                                           ("two.pt:second", "y"), ("y.pth", "y")])
def test_file_key_picks_that_array(folder: Path, capsys, spec: str, expected: str) -> None:
    status, out, err = run(folder, capsys, "distance", spec, "x.npy")
    assert status == 0 and err == "", err
    arrays = {"x": np.load(folder / "x.npy"), "y": np.load(folder / "y.npy")}
    assert printed_d_aff(out) == pytest.approx(ah.d_aff(arrays[expected], arrays["x"]).upper, rel=1e-5)


@pytest.mark.parametrize("spec,pattern", [
    ("two.npz", r"two\.npz holds 2 arrays \['first', 'second'\]; choose one with two\.npz:KEY"),
    ("two.pt", r"two\.pt holds 2 arrays \['first', 'second'\]; choose one with two\.pt:KEY"),  # the int is not one
    ("two.npz:third", r"two\.npz: no array named 'third'; it holds \['first', 'second'\]"),
    ("two.pt:step", r"two\.pt: no array named 'step'; it holds \['first', 'second'\]"),
    ("x.csv", r"x\.csv: unknown file type '\.csv'; use \.npy, \.npz, \.pt, \.pth"),
    ("noext", r"noext: unknown file type '\(none\)'"),
    ("list.pt", r"list\.pt holds a list, not a tensor"),
    ("no_tensors.pt", r"no_tensors\.pt holds a dict without tensors \(keys \['name', 'step'\]\)"),
    ("pickled.pt", r"pickled\.pt: cannot read it as \.pt: "),
], ids=["npz-several", "pt-several", "npz-unknown-key", "pt-non-tensor-key", "csv", "no-suffix", "pt-list",
        "pt-no-tensors", "pt-pickled-object"])
def test_a_file_that_holds_no_single_array_is_named(folder: Path, capsys, spec: str, pattern: str) -> None:
    assert re.search(pattern, error_line(folder, capsys, "distance", spec, "x.npy"))


def test_an_unreadable_sidecar_is_named(folder: Path, capsys) -> None:
    line = error_line(folder, capsys, "distance", "stack.npy", "x.npy", "--layer", "1")
    assert re.search(r"stack\.json: unreadable sidecar: ", line), line


@pytest.mark.parametrize("names", ["a,b", "a,b,c,d", "a,a,b", "a,,b", " , ,"],
                         ids=["too-few", "too-many", "repeated", "empty", "blank"])
def test_bad_names_are_named(folder: Path, capsys, names: str) -> None:
    line = error_line(folder, capsys, "pairwise", "x.npy", "y.npy", "two.npz:first", "--names", names)
    assert f"--names {names!r}: need 3 distinct comma-separated names, one per file" in line


def test_good_names_label_the_table(folder: Path, capsys, tmp_path: Path) -> None:
    status, out, err = run(folder, capsys, "pairwise", "x.npy", "y.npy", "--names", "left, right",
                           "--out", str(tmp_path / "t.csv"))
    assert status == 0, err
    assert (tmp_path / "t.csv").read_text().splitlines()[0] == "mapped_from,left,right"


def test_a_result_that_did_not_converge_says_so(folder: Path, capsys) -> None:
    x, y = np.load(folder / "x.npy"), np.load(folder / "y.npy")
    status, out, err = run(folder, capsys, "distance", "x.npy", "y.npy", "--max-iter", "1", "--tol", "1e-12")
    with pytest.warns(ah.errors.ConvergenceWarning):
        expected = ah.d_aff(x, y, tol=1e-12, max_iter=1)
    assert not expected.converged  # the case really does not converge
    assert status == 0  # a valid upper bound: not an error
    assert "NOT converged: raise --max-iter" in out and f"after {expected.iterations} iterations" in out
    lower, upper = map(float, re.search(r"interval\s+\[(\S+), (\S+)\]", out).groups())
    assert upper == pytest.approx(expected.upper, rel=1e-5) and lower == pytest.approx(expected.lower, rel=1e-5)
    assert lower < upper * (1 - 1e-6)
    notes = err.strip().splitlines()
    assert len(notes) == 1 and re.match(r"affine-homotopy: note: .*did not reach tol = 1e-12 within max_iter = 1",
                                        notes[0]), err
    status, out, err = run(folder, capsys, "pairwise", "x.npy", "y.npy", "--max-iter", "1", "--tol", "1e-12")
    assert status == 0 and re.fullmatch(r"affine-homotopy: note: d_aff: [12] of 2 ordered pairs.*\n", err), err


@pytest.mark.parametrize("argument,named", [("max_iter", "--max-iter: "), ("source", "x.npy: "), ("target", "y.npy: "),
                                            ("probe", "")])
def test_errors_are_named_by_their_argument_field_not_their_text(folder: Path, capsys, monkeypatch, argument: str,
                                                                 named: str) -> None:
    """Whatever the library's message says, the option or file the command names comes from the error's
    ``argument`` field."""
    from affine_homotopy import api
    from affine_homotopy.errors import ConfigError

    def refuse(*_, **__):
        raise ConfigError("a reworded message that names nothing", argument=argument, value=0)

    monkeypatch.setattr(api, "distances", refuse)
    line = error_line(folder, capsys, "distance", "x.npy", "y.npy")
    assert line == f"affine-homotopy: error: {named}a reworded message that names nothing"
