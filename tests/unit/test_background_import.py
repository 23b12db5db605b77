"""jobs/runtime/imports.py: a module imported in the background is there for the later import;
one that fails leaves its error to the later import, which raises it as always."""

from __future__ import annotations

import importlib
import sys

import pytest

from jobs.runtime.imports import import_in_background


def test_a_module_imported_in_the_background_is_loaded_once_for_the_later_import(tmp_path, monkeypatch):
    (tmp_path / "slow_to_load.py").write_text("import time\ntime.sleep(0.2)\nLOADS = []\nLOADS.append(1)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "slow_to_load", raising=False)
    thread = import_in_background("slow_to_load")
    module = importlib.import_module("slow_to_load")  # waits for the import under way
    thread.join()
    assert module.LOADS == [1]  # its body ran once, not once per import


def test_a_failing_import_in_the_background_raises_at_the_later_import(tmp_path, monkeypatch):
    (tmp_path / "broken_module.py").write_text("raise ValueError('broken on purpose')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import_in_background("broken_module").join()
    with pytest.raises(ValueError, match="broken on purpose"):
        importlib.import_module("broken_module")


def test_importing_a_module_the_background_import_needs_waits_for_it_instead_of_deadlocking(tmp_path, monkeypatch):
    """first imports second and second imports first, each after a pause: imported from two
    threads at once, each holds one module's lock and Python raises _DeadlockError in one."""
    from jobs.runtime.imports import wait_for_background_imports

    (tmp_path / "first_half.py").write_text("import time\ntime.sleep(0.3)\nimport second_half\nNAME = 'first'\n")
    (tmp_path / "second_half.py").write_text("import time\ntime.sleep(0.3)\nimport first_half\nNAME = 'second'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("first_half", "second_half"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    thread = import_in_background("first_half")
    wait_for_background_imports()
    assert not thread.is_alive()
    assert importlib.import_module("second_half").NAME == "second"
    assert sys.modules["first_half"].NAME == "first"
