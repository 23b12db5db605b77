"""`lockstep demo`: every query in conf/queries, each in a fresh run folder, then a verdict table.

Sources under data/generated/ are produced by the synthetic changelog generator when missing
(the large changelog is not committed).
"""

from __future__ import annotations

import contextlib
import shutil
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from expectations.report.publish import publish_error
from jobs.changelog.generate import generate_changelog
from jobs.cli.demo_kafka import run_on_local_kafka
from jobs.cli.demo_service import DemoDimensionService, tables_in
from jobs.cli.demo_store import run_on_local_store
from jobs.errors import SpecError, one_line
from jobs.pipeline import Pipeline
from jobs.plan import plan_query
from jobs.runtime.progress import Progress, counts
from jobs.runtime.spark import LOGS, log_jvm_to
from jobs.spec import load_settings, load_spec, with_master, with_overrides

GENERATED = "generated"
DIMENSIONS = Path("data") / "dimensions"  # <table>.json files the demo's lookup joins ask for
LOCAL_HOSTS = ("127.0.0.1", "localhost")


@contextlib.contextmanager
def _dimension_service(folder: Path, progress: Progress):
    """The demo's HTTP dimension service on a port of its own for the duration of the demo (None
    without tables): two demos, or a demo beside a test, never contend for one port."""
    if not folder.is_dir():
        yield None
        return
    with DemoDimensionService(tables_in(folder), port=0) as service:
        progress.say(f"dimension service on {service.url}: {', '.join(service.tables)}")
        yield service


def _served_by(spec, service):
    """The spec with each lookup that asks the local demo service for one of its tables pointed
    at the port the demo's service listens on (the bundled spec names the port that `python -m
    jobs.cli.demo_service` uses by default)."""
    if service is None:
        return spec
    lookups = {
        name: lookup.model_copy(update={"url": _on_service(lookup.url, service)})
        for name, lookup in spec.lookups.items()
    }
    return spec.model_copy(update={"lookups": lookups})


def _on_service(url: str, service) -> str:
    parts = urlsplit(url)
    table = parts.path.strip("/").split("/")[0]
    if parts.hostname not in LOCAL_HOSTS or table not in service.tables:
        return url
    return urlunsplit(parts._replace(netloc=urlsplit(service.url).netloc))


def run_demo(args) -> int:
    settings = with_master(load_settings(args.settings), args.master)
    progress = Progress(quiet=args.quiet)
    specs = sorted(args.queries.glob("*.yaml"))
    if not specs:
        raise SpecError("no query specs (*.yaml) here", where=str(args.queries))
    if args.local_store:
        return run_on_local_store(args, settings, specs, progress, _run_all)
    if args.local_kafka:
        return run_on_local_kafka(args, settings, specs, progress, _run_all)
    out = args.out or settings.runs_dir
    rows = _run_all(args, settings, specs, out, progress)
    print(
        f"\nreports: {out}/index.html (one page per query: {out}/<query>/report.html, figures in "
        f"report.json); Data Docs: {out}/<query>/gx/uncommitted/data_docs/local_site/index.html"
    )
    return _exit_code(rows)


def _run_all(args, settings, specs: list[Path], out: Path | str, progress: Progress, on_store=None) -> list[dict]:
    """Every spec's row, then the table printed. on_store(spec) points a spec's sources at the
    store and clears its run folder there (--local-store), or at topics (--local-kafka)."""
    local_out = Path(out) if not isinstance(out, str) else Path(settings.store.work_dir).expanduser() / "demo"
    log_jvm_to(local_out / LOGS / "demo.spark.log")  # not in a query's folder: each is cleared first
    rows = []
    with _dimension_service(args.queries / DIMENSIONS, progress) as service:
        for path in specs:
            rows.append(_run_one(path, settings, out, progress, args, service, on_store))
    print(_table(rows))
    return rows


def _exit_code(rows: list[dict]) -> int:
    verdicts = {r["verdict"] for r in rows}
    return 2 if "error" in verdicts else (1 if "fail" in verdicts else 0)


def _run_one(path: Path, settings, out: Path | str, progress: Progress, args, service, on_store=None) -> dict:
    """One query's row of the table. A query that cannot even be planned gets an error report of
    its own; one that fails later got it from the pipeline. Either way the others go on."""
    started = time.monotonic()
    try:
        spec = _served_by(
            with_overrides(
                load_spec(path), writer=args.writer, engine=args.engine, on_cluster=settings.spark.on_cluster
            ),
            service,
        )
        _generate_missing(spec, progress, args.generated_events)
        if on_store is not None:
            spec = on_store(spec)
        pipeline = Pipeline.of(plan_query(spec), settings, out, progress)
    except Exception as exc:
        if not isinstance(out, str):
            publish_error(path.stem, "", Path(out) / path.stem, one_line(exc))
        return _error_row(path, exc, started)
    shutil.rmtree(pipeline.layout.root, ignore_errors=True)
    progress.say(f"== {spec.name} ({path}) ==")
    try:
        report = pipeline.run()
    except Exception as exc:
        return _error_row(path, exc, started)
    return {
        "query": report.query,
        "verdict": report.verdict,
        "stream_rows": report.stream_rows,
        "batch_rows": report.batch_rows,
        "changelog": report.changelog,
        "seconds": time.monotonic() - started,
    }


def _error_row(path: Path, exc: Exception, started: float) -> dict:
    return {"query": path.stem, "verdict": "error", "detail": one_line(exc), "seconds": time.monotonic() - started}


def _generate_missing(spec, progress: Progress, events: int) -> None:
    for source in spec.sources.values():
        if isinstance(source.path, Path) and GENERATED in source.path.parts and not source.path.exists():
            progress.say(f"generating the synthetic changelog ({events:,} events) in {source.path}")
            rows = generate_changelog(source.path, events=events)
            progress.say(f"wrote {rows:,} changelog rows")


def _table(rows: list[dict]) -> str:
    header = f"{'query':<28} {'verdict':<8} {'stream':>9} {'batch':>9} {'output changelog':<40} {'time':>7}"
    lines = ["", header, "-" * len(header)]
    for r in rows:
        if r["verdict"] == "error":
            lines.append(f"{r['query']:<28} {'ERROR':<8} {r['detail']}")
            continue
        lines.append(
            f"{r['query']:<28} {r['verdict'].upper():<8} {r['stream_rows']:>9,} "
            f"{r['batch_rows']:>9,} {counts(r['changelog']):<40} {r['seconds']:>6.1f}s"
        )
    return "\n".join(lines)
