"""A run folder moved to another path (an Airflow worker that mounts it elsewhere) resumes
where it stopped: nothing streamed twice, nothing skipped."""

import shutil

from deltalake import DeltaTable

from jobs.pipeline import Pipeline
from jobs.plan import plan_query
from jobs.runtime.progress import Progress
from jobs.spec import load_spec
from jobs.spec.model import Settings
from jobs.stream.relocate import ROOT_FILE
from tests.conftest import change, orders_spec, write_changelog

SQL = "SELECT pId, SUM(income) AS total, COUNT(*) AS n FROM orders GROUP BY pId"


def pipeline(tmp_path, runs):
    return Pipeline.of(plan_query(load_spec(tmp_path / "q.yaml")), Settings(), runs, Progress(quiet=True))


def test_a_moved_run_folder_streams_only_the_new_file_and_agrees(spark, tmp_path):
    orders_spec(tmp_path, SQL)
    write_changelog(tmp_path / "orders", "001.json", [change("+I", 1, 1, 5), change("+I", 2, 1, 6)])
    assert pipeline(tmp_path, tmp_path / "here").run().passed
    shutil.move(tmp_path / "here", tmp_path / "there")
    write_changelog(tmp_path / "orders", "002.json", [change("-U", 1, 1, 5), change("+U", 1, 2, 7)])
    moved = pipeline(tmp_path, tmp_path / "there")
    result = moved.stream()
    assert result.input_rows == 2  # only the new file's rows: the first file's were not read again
    assert moved.run().passed
    rows = DeltaTable(str(tmp_path / "there" / "q" / "stream")).to_pyarrow_table().to_pylist()
    assert sorted((r["pId"], r["total"], r["n"]) for r in rows) == [(1, 6, 1), (2, 7, 1)]
    assert (tmp_path / "there" / "q" / "_state" / ROOT_FILE).read_text().strip() == str(
        (tmp_path / "there" / "q").resolve()
    )
