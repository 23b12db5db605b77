"""The spec's `lookups.<name>` as the engine's LookupConfig."""

from __future__ import annotations

from datetime import timedelta

from jobs.lookup.config import LookupConfig, parse_output
from jobs.spec.intervals import parse_interval
from jobs.spec.model import LookupSpec


def config_of(name: str, spec: LookupSpec) -> LookupConfig:
    seconds = lambda text: parse_interval(text) / timedelta(seconds=1)  # noqa: E731
    return LookupConfig(
        name=name,
        url=spec.url,
        key=tuple(spec.key),
        output=parse_output(spec.output),
        capacity=spec.capacity,
        timeout_seconds=seconds(spec.timeout),
        retries=spec.retries,
        order=spec.order,
        cache_max_rows=spec.cache.max_rows,
        cache_ttl_seconds=seconds(spec.cache.ttl),
        on_error=spec.on_lookup_error,
    )
