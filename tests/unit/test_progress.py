"""Progress: rich lines, a spinner and a bar on a terminal; nothing off one; plain lines to an
Airflow task's logger."""

import io
import re

from jobs.runtime.progress import Progress


def test_on_a_terminal_lines_carry_the_elapsed_time_and_the_bar_goes_when_the_rows_are_read():
    screen = io.StringIO()
    progress = Progress(stream=screen, terminal=True)
    with progress.waiting("starting Spark ..."):
        pass
    progress.say("batch 0: 3 rows [pId] 27%")  # brackets are text, not rich markup
    progress.advance(3, 11, "micro-batches")
    assert progress._bar is not None
    progress.advance(11, 11, "micro-batches")
    assert progress._bar is None
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen.getvalue())  # without the terminal's codes
    assert re.search(r"\[ +\d+\.\ds\] batch 0: 3 rows \[pId\] 27%\n", text)
    assert "11 of 11 rows" in text  # the bar was drawn


def test_off_a_terminal_or_quiet_nothing_is_written():
    for progress in (Progress(stream=io.StringIO(), terminal=False), Progress(quiet=True, terminal=True)):
        progress.say("batch 0")
        progress.advance(1, 2, "micro-batches")
        with progress.waiting("starting Spark"):
            pass
        assert progress._bar is None
    screen = io.StringIO()
    Progress(stream=screen, terminal=False).say("batch 0")
    assert screen.getvalue() == ""


def test_an_airflow_logger_gets_plain_lines_and_no_bar():
    lines = []
    progress = Progress(emit=lines.append)
    with progress.waiting("starting Spark ..."):
        progress.say("Spark started in 12.0 s")
    progress.advance(1, 2, "micro-batches")
    assert lines == ["starting Spark ...", "Spark started in 12.0 s"] and progress._bar is None
