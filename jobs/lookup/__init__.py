"""Lookup joins (Flink's Async I/O): enrich changelog rows from an external dimension service.

`config` describes one lookup table; `engine` performs a batch of lookups with bounded
concurrency, retries, a cache and Flink's ordered / unordered output modes.
"""

from jobs.lookup.config import LookupConfig, parse_output
from jobs.lookup.engine import AsyncLookup, LookupStats, ServiceError

__all__ = ["AsyncLookup", "LookupConfig", "LookupStats", "ServiceError", "parse_output"]
