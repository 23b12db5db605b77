"""Query specs and settings: YAML files validated at the edge, frozen models inside."""

from jobs.spec.load import load_settings, load_spec, with_engine, with_master, with_overrides, with_writer
from jobs.spec.model import QuerySpec, Settings, SinkSpec, SourceSpec, StreamSpec

__all__ = [
    "QuerySpec",
    "Settings",
    "SinkSpec",
    "SourceSpec",
    "StreamSpec",
    "load_settings",
    "load_spec",
    "with_engine",
    "with_master",
    "with_overrides",
    "with_writer",
]
