"""The JSON Schemas editors check specs with: the committed files are what `lockstep schema`
prints, every bundled spec and settings file points at its schema and validates against it, and
the schema refuses what the loader refuses."""

from __future__ import annotations

import re
from pathlib import Path

import jsonschema
import pytest
import yaml

from jobs.cli.main import main
from jobs.spec.json_schema import json_schema
from tests.conftest import ROOT

CONF = ROOT / "conf"
SPECS = sorted((CONF / "queries").glob("*.yaml"))
SCHEMA_LINE = re.compile(r"^# yaml-language-server: \$schema=(\S+)$")


@pytest.mark.parametrize("kind", ["spec", "settings"])
def test_the_committed_schema_is_what_lockstep_schema_prints(kind, capsys):
    assert main(["schema", kind]) == 0
    printed = capsys.readouterr().out
    assert printed == (CONF / "schema" / f"{kind}.schema.json").read_text(), (
        f"regenerate it: lockstep schema {kind} > conf/schema/{kind}.schema.json"
    )


@pytest.mark.parametrize("path", [*SPECS, CONF / "settings.yaml"], ids=lambda p: p.name)
def test_every_bundled_file_points_at_its_schema_and_validates(path):
    first = path.read_text().splitlines()[0]
    match = SCHEMA_LINE.match(first)
    assert match, f"{path.name}: the first line should be '# yaml-language-server: $schema=...'"
    schema_file = (path.parent / match.group(1)).resolve()
    kind = "settings" if path.name == "settings.yaml" else "spec"
    assert schema_file == (CONF / "schema" / f"{kind}.schema.json").resolve()
    jsonschema.validate(yaml.safe_load(path.read_text()) or {}, json_schema(kind))


@pytest.mark.parametrize(
    "edit, complaint",
    [
        (lambda s: s | {"colour": "red"}, "Additional properties are not allowed ('colour'"),
        (lambda s: s | {"name": "has space"}, "does not match"),
        (lambda s: {k: v for k, v in s.items() if k != "sql"}, "'sql' is a required property"),
        (lambda s: s | {"sink": {"writer": "parquet"}}, "'parquet' is not one of"),
    ],
)
def test_the_schema_refuses_what_the_loader_refuses(edit, complaint):
    spec = yaml.safe_load(Path(CONF / "queries" / "income_per_product.yaml").read_text())
    with pytest.raises(jsonschema.ValidationError, match=re.escape(complaint)):
        jsonschema.validate(edit(spec), json_schema("spec"))
