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
