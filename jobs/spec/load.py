"""Load YAML specs and settings, turning every problem into one SpecError naming file and line."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, get_args

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from jobs.errors import SpecError, place
from jobs.spec.locations import location
from jobs.spec.model import Engine, QuerySpec, Settings, SinkSpec

DEFAULT_SETTINGS = Path("conf/settings.yaml")
SETTINGS_VARIABLE, RUNS_DIR_VARIABLE = "LOCKSTEP_SETTINGS", "LOCKSTEP_RUNS_DIR"


def load_spec(path: str | Path) -> QuerySpec:
    path = Path(path)
    data, root = _read_yaml(path)
    spec = _validate(QuerySpec, data, root, path)
    sources = {
        name: src
        if src.path is None or isinstance(src.path, str)
        else src.model_copy(update={"path": (path.parent / src.path).resolve()})
        for name, src in spec.sources.items()
    }
    return spec.model_copy(
        update={
            "sources": sources,
            "spec_path": path,
            "sql_line": _sql_start_line(root),
            "key_lines": dict(_key_lines(root)),
        }
    )


def load_settings(path: str | Path | None = None) -> Settings:
    """Settings from `path` (--settings), else the file LOCKSTEP_SETTINGS names, else
    conf/settings.yaml when present, else the embedded defaults. LOCKSTEP_RUNS_DIR, when set,
    overrides the file's runs_dir."""
    settings = _settings_file(path)
    runs_dir = os.environ.get(RUNS_DIR_VARIABLE)
    return settings.model_copy(update={"runs_dir": location(runs_dir)}) if runs_dir else settings


def _settings_file(path: str | Path | None) -> Settings:
    from_variable = not path and os.environ.get(SETTINGS_VARIABLE)
    named = path or from_variable
    if not named and not DEFAULT_SETTINGS.exists():
        return Settings()
    path = Path(named) if named else DEFAULT_SETTINGS
    if not path.exists():
        named_by = f" (named by {SETTINGS_VARIABLE})" if from_variable else ""
        raise SpecError(f"settings file not found{named_by}", where=str(path))
    data, root = _read_yaml(path)
    settings = _validate(Settings, data, root, path)
    return settings.model_copy(update={"settings_path": path})


def _read_yaml(path: Path) -> tuple[dict[str, Any], yaml.Node | None]:
    if not path.is_file():
        raise SpecError("file not found", where=str(path))
    text = _utf8_text(path)
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark else None
        raise SpecError(f"invalid YAML: {exc.problem}", where=place(path, line)) from None
    except yaml.YAMLError as exc:
        raise SpecError(f"invalid YAML: {exc}", where=str(path)) from None
    except RecursionError:
        raise SpecError("the YAML is nested too deep", where=str(path)) from None
    if not isinstance(data, dict):
        raise SpecError("expected a mapping of keys at the top level", where=str(path))
    for forbidden in ("spec_path", "sql_line", "key_lines", "settings_path"):
        if forbidden in data:
            raise SpecError(f"unknown key '{forbidden}'", where=place(path, _line_of(root, (forbidden,))))
    return data, root


def _utf8_text(path: Path) -> str:
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise SpecError(f"not UTF-8 text (byte 0x{data[exc.start]:02x})", where=place(path, line)) from None


def _validate(model: type[BaseModel], data: dict[str, Any], root: yaml.Node | None, path: Path):
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        # A misspelt key shows up twice: as unknown, and as the required key that is missing.
        # The unknown one says what to fix.
        errors = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
        first = errors[0]
        loc = tuple(first["loc"])
        dotted = ".".join(str(part) for part in loc) or "(top level)"
        more = len(errors) - 1
        suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
        raise SpecError(f"{dotted}: {_describe(first)}{suffix}", where=place(path, _line_of(root, loc))) from None


def _describe(error: ErrorDetails) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        return "unknown key"
    if kind == "missing":
        return "required key is missing"
    if kind == "literal_error":
        expected = error.get("ctx", {}).get("expected", "")
        return f"must be one of {expected} (got {error['input']!r})"
    return error["msg"].removeprefix("Value error, ")


def _line_of(root: yaml.Node | None, loc: tuple[Any, ...]) -> int | None:
    """1-based line of the deepest mapping key along `loc` that exists in the YAML."""
    node, line = root, None
    for part in loc:
        if not isinstance(node, yaml.MappingNode):
            break
        match = next(((k, v) for k, v in node.value if k.value == str(part)), None)
        if match is None:
            break
        line, node = match[0].start_mark.line + 1, match[1]
    if line is None and root is not None:
        line = root.start_mark.line + 1
    return line


def _key_lines(node: yaml.Node | None, prefix: str = ""):
    """(dotted path, 1-based line) of every mapping key under `node`."""
    if not isinstance(node, yaml.MappingNode):
        return
    for key, value in node.value:
        dotted = f"{prefix}{key.value}"
        yield dotted, key.start_mark.line + 1
        yield from _key_lines(value, dotted + ".")


def _sql_start_line(root: yaml.Node | None) -> int:
    """The YAML line on which the first line of the SQL text sits."""
    if not isinstance(root, yaml.MappingNode):
        return 1
    for key, value in root.value:
        if key.value == "sql":
            block = getattr(value, "style", None) in ("|", ">")
            return value.start_mark.line + (2 if block else 1)
    return 1


def with_writer(spec: QuerySpec, writer: str | None) -> QuerySpec:
    """The spec with its sink writer overridden (`--writer`); unchanged for None."""
    if writer is None:
        return spec
    writers = get_args(SinkSpec.model_fields["writer"].annotation)
    if writer not in writers:
        raise SpecError(f"writer {writer!r} is not one of {', '.join(writers)}", where=str(spec.spec_path))
    return _revalidated(spec, sink=spec.sink.model_copy(update={"writer": writer}))


def with_engine(spec: QuerySpec, engine: str | None) -> QuerySpec:
    """The spec with its stream engine overridden (`--engine`); unchanged for None. The spark
    engine brings the delta-spark writer with it, unless a writer was chosen."""
    if engine is None:
        return spec
    engines = get_args(Engine)
    if engine not in engines:
        raise SpecError(f"engine {engine!r} is not one of {', '.join(engines)}", where=str(spec.spec_path))
    return _revalidated(spec, stream=spec.stream.model_copy(update={"engine": engine}))


def with_overrides(
    spec: QuerySpec, *, writer: str | None = None, engine: str | None = None, on_cluster: bool = False
) -> QuerySpec:
    """The spec with the command line's --engine and --writer applied. With neither an --engine
    nor a stream.engine in the spec, a cluster master (`on_cluster`) chooses the spark engine,
    whose state lives on the executors; local otherwise."""
    return with_writer(with_engine(spec, engine or _cluster_default(spec, writer, on_cluster)), writer)


def _cluster_default(spec: QuerySpec, writer: str | None, on_cluster: bool) -> str | None:
    """spark when the master is a cluster and nothing chose an engine or a driver-side writer
    (delta-rs, which the spark engine cannot use: the writer chosen explicitly wins)."""
    if not on_cluster or "engine" in spec.stream.model_fields_set:
        return None
    chosen_writer = writer or (spec.sink.writer if "writer" in spec.sink.model_fields_set else None)
    return None if chosen_writer == "delta-rs" else "spark"


def _revalidated(spec: QuerySpec, **sections: BaseModel) -> QuerySpec:
    """The spec with `sections` replaced, checked again as a whole (an engine and a writer that
    do not go together are one line)."""
    try:
        return QuerySpec.model_validate({**dict(spec), **sections})
    except ValidationError as exc:
        message = exc.errors()[0]["msg"].removeprefix("Value error, ")
        raise SpecError(message, where=str(spec.spec_path)) from None


def with_master(settings: Settings, master: str | None) -> Settings:
    """The settings with Spark's master overridden (`--master`); unchanged for None."""
    if master is None:
        return settings
    return settings.model_copy(update={"spark": settings.spark.model_copy(update={"master": master})})
