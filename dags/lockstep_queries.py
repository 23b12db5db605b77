"""One Airflow DAG per lockstep query spec (conf/queries, or LOCKSTEP_QUERIES): stream >> batch
>> check, built when Airflow parses this file (operators_lib/query_dags.py), with no file written.
A spec that cannot become a DAG gets one whose only task fails naming why; the others load.
"""

from __future__ import annotations

from operators_lib.query_dags import query_dags

globals().update(query_dags())
