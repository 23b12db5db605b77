"""`lockstep`: run a query as a stream and as a batch job, and check that they agree.

Exit codes: 0 the check passed, 1 stream and batch disagree (or a retraction rule broke),
2 invalid spec, SQL or input (one line on stderr naming the file, line or construct), or any other
failure before a verdict.
"""

from __future__ import annotations

import argparse
import logging
import sys
import traceback
from pathlib import Path

from jobs.errors import LockstepError, one_line
from jobs.spec.locations import location

EXIT_PASS, EXIT_FAIL, EXIT_INVALID = 0, 1, 2


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return EXIT_INVALID
    try:
        return args.handler(args)
    except LockstepError as exc:
        if args.debug:
            traceback.print_exc()
        print(f"lockstep: error: {exc}", file=sys.stderr)
        if exc.excerpt:
            print(exc.excerpt, file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("lockstep: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a failure before a verdict is never exit 1 ("they disagree")
        if args.debug:
            traceback.print_exc()
        from jobs.runtime.spark import out_of_memory

        out_of_heap = out_of_memory()
        if not args.debug and (out_of_heap or _jvm_gone(exc)):
            # A JVM that died leaves py4j's threads logging tracebacks of their lost connections
            # until this process ends: the one line below says what happened.
            logging.disable(logging.CRITICAL)
        print(f"lockstep: error: {out_of_heap or one_line(exc)} ({_where_to_look()})", file=sys.stderr)
        return EXIT_INVALID


def _jvm_gone(exc: Exception) -> bool:
    return isinstance(exc, ConnectionError) or type(exc).__name__ == "Py4JNetworkError"


def _where_to_look() -> str:
    from jobs.runtime.spark import jvm_log

    log = jvm_log()
    return f"--debug shows where; Spark's log: {log}" if log else "--debug shows where"


def _parser() -> argparse.ArgumentParser:
    from jobs.cli import commands

    parser = argparse.ArgumentParser(
        prog="lockstep",
        description=__doc__.split("\n\n")[0],
        epilog="Exit codes: 0 pass, 1 stream and batch disagree, 2 invalid spec, SQL or input, or a failure "
        "before a verdict. Environment: LOCKSTEP_SETTINGS (settings file), LOCKSTEP_RUNS_DIR (runs "
        "folder).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    _global_flags(parser, None)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, handler, help_text, with_spec in commands.COMMANDS:
        command = sub.add_parser(name, help=help_text, description=help_text)
        if with_spec:
            command.add_argument("spec", type=Path, help="query spec (YAML), e.g. conf/queries/income_per_product.yaml")
        if name not in ("explain", "report", "schema"):  # these write no run folder
            command.add_argument(
                "--out",
                type=location,
                default=None,
                help="runs folder, or an object store's s3a://bucket/prefix (default: LOCKSTEP_RUNS_DIR, "
                "else runs_dir from the settings, 'runs')",
            )
        # Given after the command they win; left out, the value given before it stands.
        _global_flags(command, argparse.SUPPRESS)
        commands.extra_arguments(name, command)
        command.set_defaults(handler=handler)
    return parser


def _global_flags(parser: argparse.ArgumentParser, default) -> None:
    """--settings, --quiet and --debug, accepted before the command and after it."""
    flag_default = False if default is None else default
    parser.add_argument(
        "--settings",
        type=Path,
        default=default,
        help="settings file (default: LOCKSTEP_SETTINGS, else conf/settings.yaml if present)",
    )
    parser.add_argument("--quiet", action="store_true", default=flag_default, help="no progress output")
    parser.add_argument("--debug", action="store_true", default=flag_default, help="show tracebacks")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("lockstep")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


if __name__ == "__main__":
    sys.exit(main())
