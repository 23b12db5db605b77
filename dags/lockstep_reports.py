"""lockstep_reports: daily, rebuild every report page and the index of the runs folder
(runs/index.html), and fail loudly, naming each query and its report, when any query's latest
verdict is "fail".

Parsing this file imports neither Spark nor Great Expectations. LOCKSTEP_RUNS_DIR overrides the
runs folder, as for the query DAGs.
"""

from __future__ import annotations

from airflow.sdk import DAG

from operators_lib import LockstepReportOperator
from operators_lib.dag_defaults import POOL, START, runs_dir

with DAG(
    dag_id="lockstep_reports",
    schedule="@daily",
    start_date=START,
    catchup=False,
    max_active_runs=1,
    tags=["lockstep"],
    doc_md=__doc__,
    description="rebuild the lockstep report index; fail when a query's latest verdict is fail",
) as dag:
    LockstepReportOperator(task_id="rebuild_reports", runs_dir=str(runs_dir()), pool=POOL)
