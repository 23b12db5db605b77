"""Importing a slow module in the background, while the process waits on something else.

Great Expectations takes two to three seconds to import, all of it Python. `lockstep run` starts
importing the check while the batch job runs, which spends that time waiting for Spark's JVM;
the check's own import then finds the module loaded, or waits for the import under way (Python
takes one module's import in one thread at a time). An import that fails in the background is
left for the later import to raise, where its error is reported as always.

Another module of the same package imported meanwhile can deadlock with it: each thread holds one
module's lock and waits for the other's, and Python raises _DeadlockError in one of them (an error
report importing expectations.report while expectations.check was loading did). Whoever imports
from such a package waits for the background imports first (wait_for_background_imports).
"""

from __future__ import annotations

import importlib
import threading

_underway: list[threading.Thread] = []


def import_in_background(module: str) -> threading.Thread:
    thread = threading.Thread(target=_quietly, args=(module,), name=f"import {module}", daemon=True)
    thread.start()
    _underway.append(thread)
    return thread


def wait_for_background_imports() -> None:
    """Until every import started in the background has finished (or failed)."""
    while _underway:
        _underway.pop().join()


def _quietly(module: str) -> None:
    try:
        importlib.import_module(module)
    except Exception:  # noqa: BLE001  # raised again where the module is imported for use
        return
