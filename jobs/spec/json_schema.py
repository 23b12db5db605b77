"""JSON Schemas of the query spec and the settings file, from their models, for editors
(`# yaml-language-server: $schema=...` at the top of a YAML file) and for `lockstep schema`."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from jobs.spec.model import QuerySpec, Settings

DIALECT = "https://json-schema.org/draft/2020-12/schema"
MODELS: dict[str, type[BaseModel]] = {"spec": QuerySpec, "settings": Settings}


def json_schema(kind: str = "spec") -> dict[str, Any]:
    """The JSON Schema of a query spec ("spec") or of the settings file ("settings")."""
    schema = MODELS[kind].model_json_schema(by_alias=True)
    return {"$schema": DIALECT, **schema, "title": f"lockstep {kind}"}


def json_schema_text(kind: str = "spec") -> str:
    return json.dumps(json_schema(kind), indent=2, sort_keys=True) + "\n"
