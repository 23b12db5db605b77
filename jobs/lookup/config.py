"""One lookup table: where its dimension service answers, its key and output columns, and how
hard to try (capacity, timeout, retries, cache, what a lookup that still fails becomes)."""

from __future__ import annotations

import string
from dataclasses import dataclass
from urllib.parse import quote

from jobs.changelog.schema import parse_schema
from jobs.errors import SpecError

ORDERS = ("ordered", "unordered")
ON_ERROR = ("fail", "null")


@dataclass(frozen=True)
class LookupConfig:
    name: str
    url: str  # template: {column} placeholders name key columns
    key: tuple[str, ...]
    output: tuple[tuple[str, str], ...]  # (column, Spark type such as "STRING")
    capacity: int = 100  # requests in flight
    timeout_seconds: float = 2.0  # per attempt
    retries: int = 2  # extra attempts after the first
    order: str = "ordered"
    cache_max_rows: int = 0  # 0: no cache
    cache_ttl_seconds: float = 600.0
    on_error: str = "fail"

    def __post_init__(self):
        where = f"lookup {self.name}"
        _check_choice(self.order, ORDERS, "order", where)
        _check_choice(self.on_error, ON_ERROR, "on_error", where)
        _check_positive(
            where,
            capacity=self.capacity,
            timeout_seconds=self.timeout_seconds,
            cache_ttl_seconds=self.cache_ttl_seconds,
        )
        if self.retries < 0 or self.cache_max_rows < 0:
            raise SpecError("retries and cache_max_rows must not be negative", where=where)
        _check_placeholders(self.url, self.key, where)

    @property
    def output_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.output)

    def url_for(self, key_values: tuple) -> str:
        """The template with each key value URL-quoted: a '/' or '?' in a key stays in its segment."""
        quoted = {name: quote(str(value), safe="") for name, value in zip(self.key, key_values)}
        return self.url.format(**quoted)

    def describe_key(self, key_values: tuple) -> str:
        return ", ".join(
            f"{name}={value!r}" if isinstance(value, str) else f"{name}={value}"
            for name, value in zip(self.key, key_values)
        )


def parse_output(ddl: str, *, where: str = "lookup output") -> tuple[tuple[str, str], ...]:
    """ "name STRING, tier STRING" -> (("name", "STRING"), ("tier", "STRING")), as source schemas parse."""
    return tuple((col.name, col.spark_type) for col in parse_schema(ddl, where=where).columns)


def _check_choice(value: str, choices: tuple[str, ...], field: str, where: str) -> None:
    if value not in choices:
        raise SpecError(f"{field} must be one of {', '.join(choices)}, not {value!r}", where=where)


def _check_positive(where: str, **values: float) -> None:
    for field, value in values.items():
        if not value > 0:
            raise SpecError(f"{field} must be positive, not {value!r}", where=where)


def _check_placeholders(url: str, key: tuple[str, ...], where: str) -> None:
    # Every placeholder must be a key column and every key column must reach the service:
    # a key column missing from the URL would make different keys ask the same question.
    if not key:
        raise SpecError("key names no column", where=where)
    try:
        fields = {field for _, field, _, _ in string.Formatter().parse(url) if field is not None}
    except ValueError as exc:
        raise SpecError(f"url {url!r} is not a valid template: {exc}", where=where) from None
    if unknown := sorted(fields - set(key)):
        raise SpecError(f"url placeholder {{{unknown[0]}}} is not a key column ({', '.join(key)})", where=where)
    if missing := [column for column in key if column not in fields]:
        raise SpecError(f"url {url!r} has no placeholder for key column {missing[0]}", where=where)
