"""The command line's own flags: --version, and global flags before or after the command."""

from __future__ import annotations

from importlib.metadata import version

import pytest

from jobs.cli.main import _parser, main


def test_version_prints_the_installed_distributions_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"lockstep {version('lockstep')}"


@pytest.mark.parametrize(
    "argv",
    [
        ["--quiet", "--debug", "--settings", "s.yaml", "explain", "q.yaml"],
        ["explain", "q.yaml", "--quiet", "--debug", "--settings", "s.yaml"],
        ["--quiet", "explain", "--debug", "q.yaml", "--settings", "s.yaml"],
    ],
)
def test_global_flags_work_before_or_after_the_command(argv):
    args = _parser().parse_args(argv)
    assert (args.quiet, args.debug, str(args.settings)) == (True, True, "s.yaml")


def test_global_flags_left_out_keep_their_defaults():
    args = _parser().parse_args(["run", "q.yaml"])
    assert (args.quiet, args.debug, args.settings, args.out) == (False, False, None, None)
