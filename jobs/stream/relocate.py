"""A run folder that moved (copied elsewhere, mounted at another path on an Airflow worker)
resumes where it stopped.

Everything lockstep writes names its files relative to the run folder, except one thing Spark
writes: the file source's log in each checkpoint (`checkpoint/sources/<n>/<batch>`) records the
absolute URI of every staged segment it read. Seen from a new place, those segments would look
unread. So the run folder records where it was last streamed (`_state/root`), and before a
stream starts in a new place, the logged URIs are rewritten to the new one (spark_logs.py says how
a log is rewritten safely).
"""

from __future__ import annotations

from pathlib import Path

from jobs.runtime.layout import RunLayout
from jobs.store.files import replace_whole
from jobs.stream.spark_logs import rewrite_log

ROOT_FILE = "root"  # in _state/: the absolute path the run folder was last streamed at


def follow_moved_run_folder(layout: RunLayout) -> int:
    """Rewrite the checkpoints' source logs if the folder moved; record where it is now.
    Returns how many log files were rewritten."""
    here = layout.root.resolve()
    recorded = layout.state / ROOT_FILE
    before = Path(recorded.read_text().strip()) if recorded.exists() else None
    rewritten = _rewrite_source_logs(here, before, here) if before is not None and before != here else 0
    layout.state.mkdir(parents=True, exist_ok=True)
    replace_whole(recorded, f"{here}\n")
    return rewritten


def _rewrite_source_logs(root: Path, old: Path, new: Path) -> int:
    old_uri, new_uri = old.as_uri() + "/", new.as_uri() + "/"
    rewritten = 0
    for log in root.glob("**/checkpoint/sources/*/*"):
        if not log.is_file() or log.name.startswith("."):
            continue
        text = log.read_text()
        if old_uri in text:
            rewrite_log(log, text.replace(old_uri, new_uri))
            rewritten += 1
    return rewritten
