"""One function per `lockstep` command; each returns the process exit code."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import get_args

from jobs.cli import summary
from jobs.runtime.progress import Progress
from jobs.spec.model import Engine, SinkSpec

WRITERS = get_args(SinkSpec.model_fields["writer"].annotation)
ENGINES = get_args(Engine)


def extra_arguments(name: str, command: argparse.ArgumentParser) -> None:
    if name == "demo":
        command.add_argument(
            "--queries",
            type=Path,
            default=Path("conf/queries"),
            help="folder of query specs to run (default: conf/queries)",
        )
        command.add_argument(
            "--generated-events",
            type=int,
            default=300_000,
            metavar="N",
            help="events of a synthetic changelog the demo generates when its folder "
            "(data/generated/...) is missing (default 300000)",
        )
        command.add_argument(
            "--local-store",
            action="store_true",
            help="start a local S3 server (SeaweedFS, built by `make setup`), put the queries' "
            "sources in a bucket, and run with sources, sinks and run folders on it (make demo-s3)",
        )
        command.add_argument(
            "--local-kafka",
            action="store_true",
            help="start a local Kafka broker (KRaft, fetched by `make setup`), produce the queries' "
            "changelogs to topics, and run over the topics (make demo-kafka)",
        )
    if name == "generate":
        command.add_argument("--events", type=int, default=300_000, help="logical events (default 300000)")
        command.add_argument("--groups", type=int, default=20_000, help="distinct products (default 20000)")
        command.add_argument("--seed", type=int, default=7, help="random seed (default 7)")
        command.add_argument(
            "--to",
            type=Path,
            default=Path("conf/queries/data/generated/large_orders"),
            help="folder to write (default: conf/queries/data/generated/large_orders)",
        )
    if name in ("run", "stream", "batch", "rebuild", "demo"):
        command.add_argument(
            "--writer",
            choices=WRITERS,
            default=None,
            help="who writes the Delta tables: delta-rs from the driver, or delta-spark "
            "(Delta's Spark connector) from the executors (default: the spec's "
            "sink.writer, else delta-rs)",
        )
    if name in ("run", "stream", "rebuild", "demo"):
        command.add_argument(
            "--engine",
            choices=ENGINES,
            default=None,
            help="who runs the stateful operators: local (lockstep's state on the driver) or spark "
            "(Spark's keyed state on the executors; writes with delta-spark) (default: the "
            "spec's stream.engine, else spark on a cluster master and local on local[N])",
        )
    if name in ("run", "stream", "batch", "check", "rebuild", "demo"):
        command.add_argument(
            "--master",
            default=None,
            metavar="URL",
            help="Spark master, e.g. spark://host:7077 for a standalone cluster "
            "(default: spark.master from the settings, local[2])",
        )
    if name in ("run", "stream", "batch", "check", "rebuild"):
        command.add_argument(
            "--date",
            type=_logical_date,
            default=None,
            metavar="YYYY-MM-DD",
            help="logical date of a scheduled run: stream the partitions up to it "
            "(or, once the stream is past it, re-check its consistency point "
            "by time travel)",
        )
    if name == "schema":
        command.add_argument(
            "kind",
            nargs="?",
            choices=("spec", "settings"),
            default="spec",
            help="the query spec's schema (default) or the settings file's",
        )
    if name == "report":
        command.add_argument(
            "runs_dir",
            type=Path,
            nargs="?",
            default=None,
            metavar="RUNS_DIR",
            help="runs folder (default: runs_dir from the settings, 'runs')",
        )


def _logical_date(text: str):
    from datetime import date

    try:
        return date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date (YYYY-MM-DD): {text!r}") from None


def _pipeline(args):
    """The step's pipeline, with Spark's JVM starting in the background as soon as the spec has
    planned: the second of imports that follows (pandas, Arrow, delta-rs) and the staging run
    while it starts, instead of before it. A spec that does not load or plan starts no JVM. The
    size of the sources' files chooses the JVM's compilers (jobs/runtime/jit.py)."""
    from jobs.plan import plan_query
    from jobs.runtime.spark import LOGS, log_jvm_to, start_in_background
    from jobs.spec import load_settings, load_spec, with_master, with_overrides

    progress = Progress(quiet=args.quiet)  # its clock starts with the step
    settings = with_master(load_settings(args.settings), args.master)
    spec = load_spec(args.spec)
    spec = with_overrides(
        spec,
        writer=getattr(args, "writer", None),
        engine=getattr(args, "engine", None),
        on_cluster=settings.spark.on_cluster,
    )
    plan = plan_query(spec)
    from jobs.pipeline import Pipeline

    pipeline = Pipeline.of(plan, settings, getattr(args, "out", None), progress)
    pipeline.check_store()  # wrong credentials or no bucket: one line before Spark starts
    root = pipeline.layout.root
    log_jvm_to(root.parent / LOGS / f"{root.name}.spark.log")
    start_in_background(settings.spark, pipeline.plan.spec)
    return pipeline


def cmd_explain(args) -> int:
    from jobs.plan import plan_query
    from jobs.plan.explain import explain
    from jobs.spec import load_spec

    print(explain(plan_query(load_spec(args.spec))), end="")
    return 0


def cmd_stream(args) -> int:
    _pipeline(args).stream(args.date)
    return 0


def cmd_batch(args) -> int:
    _pipeline(args).batch(args.date)
    return 0


def cmd_check(args) -> int:
    pipeline = _pipeline(args)
    report = pipeline.check(args.date)
    print(summary.verdict_lines(report, pipeline.layout, pipeline.store_url), file=sys.stdout)
    return 0 if report.passed else 1


def cmd_run(args) -> int:
    pipeline = _pipeline(args)
    report = pipeline.run(args.date)
    print(summary.verdict_lines(report, pipeline.layout, pipeline.store_url))
    return 0 if report.passed else 1


def cmd_rebuild(args) -> int:
    pipeline = _pipeline(args)
    reports = pipeline.rebuild(args.date)
    for report in reports:
        print(
            f"{report.logical_date or 'all input'}: {report.verdict.upper()}  "
            f"stream {report.stream_rows:,} rows, batch {report.batch_rows:,} rows"
        )
    passed = all(r.passed for r in reports)
    print(f"rebuild {'done' if passed else 'FAILED: the old run folder is back in place'}: {pipeline.layout.root}")
    return 0 if passed else 1


def cmd_demo(args) -> int:
    from jobs.cli.demo import run_demo

    return run_demo(args)


def cmd_generate(args) -> int:
    from jobs.changelog.generate import generate_changelog

    rows = generate_changelog(args.to, events=args.events, groups=args.groups, seed=args.seed)
    Progress(quiet=args.quiet).say(f"wrote {rows:,} changelog rows to {args.to}")
    return 0


def cmd_report(args) -> int:
    from expectations.report import rebuild
    from jobs.spec import load_settings
    from jobs.spec.locations import local_runs_folder

    pages = rebuild(local_runs_folder(args.runs_dir or load_settings(args.settings).runs_dir))
    index, reports = pages[-1], len(pages) - 1
    print(f"{index} ({reports} report page{'s' if reports != 1 else ''} and the index)")
    return 0


def cmd_schema(args) -> int:
    from jobs.spec.json_schema import json_schema_text

    print(json_schema_text(args.kind), end="")
    return 0


COMMANDS = [
    ("run", cmd_run, "stream, batch and check one query (exit 0 pass, 1 fail, 2 invalid)", True),
    ("stream", cmd_stream, "replay the sources' new changelog files into the Delta sink", True),
    ("batch", cmd_batch, "compute the query in batch on what the stream consumed", True),
    ("check", cmd_check, "run the Great Expectations suites and write report.json", True),
    (
        "rebuild",
        cmd_rebuild,
        "replay every partition into a fresh sink, checking each date; the old sink is kept until the new one passes",
        True,
    ),
    ("explain", cmd_explain, "print the plan with each operator's changelog mode", True),
    ("demo", cmd_demo, "run every query in conf/queries on the bundled data", False),
    ("generate", cmd_generate, "write the large synthetic changelog used by the demo and benchmark", False),
    ("schema", cmd_schema, "print the JSON Schema of a query spec (or of the settings file), for editors", False),
    ("report", cmd_report, "re-render every run's report.html and the runs folder's index.html", False),
]
