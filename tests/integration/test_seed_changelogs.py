"""The seed articles' examples, exactly: dedup then COUNT(DISTINCT) (seed 000), a join with a
non-equi condition (seed 001), a join into a sink keyed by another column (seed 003)."""

from __future__ import annotations

from jobs.changelog.kinds import RowKind
from tests.conftest import write_changelog, write_spec
from tests.integration.conftest import run_both, same_rows

FEED_KINDS = {"insert": "+I", "update_preimage": "-U", "update_postimage": "+U", "delete": "-D"}


def feed_sequence(feed, columns):
    """(kind, values...) per change, by commit version; within a version -U before its +U, and
    groups in the order of their first change."""
    rows = feed.to_pylist()
    rows.sort(key=lambda r: (r["_commit_version"], ))
    out = []
    for version in sorted({r["_commit_version"] for r in rows}):
        changes = [r for r in rows if r["_commit_version"] == version]
        changes.sort(key=lambda r: ({"update_preimage": 0, "insert": 1, "update_postimage": 1,
                                      "delete": 1}[r["_change_type"]]))
        out.append(sorted((FEED_KINDS[r["_change_type"]],) + tuple(r[c] for c in columns) for r in changes))
    return out


SEED_000 = """
name: seed_000
sql: |
  SELECT tms_company, COUNT(DISTINCT order_id) AS order_cnt
  FROM (
    SELECT order_id, tms_company
    FROM (
      SELECT order_id, tms_company, seq,
             ROW_NUMBER() OVER (PARTITION BY order_id ORDER BY seq DESC) AS rownum
      FROM source
    ) WHERE rownum = 1
  ) GROUP BY tms_company
sources:
  source:
    path: source
    format: json
    schema: "order_id STRING, tms_company STRING, seq BIGINT"
stream:
  rows_per_batch: 1
"""


def test_seed_000_dedup_then_count_distinct_gives_the_articles_changelog(tmp_path, spark):
    events = [("001", "ZhongTong"), ("002", "YuanTong"), ("003", "ZhongTong"), ("001", "YuanTong")]
    write_changelog(tmp_path / "source", "orders.json",
                    [{"order_id": o, "tms_company": c, "seq": i} for i, (o, c) in enumerate(events)])
    outcome = run_both(write_spec(tmp_path, SEED_000), tmp_path / "runs")
    assert outcome.stream == outcome.batch == [
        {"tms_company": "YuanTong", "order_cnt": 2}, {"tms_company": "ZhongTong", "order_cnt": 1}]
    per_version = [v for v in feed_sequence(outcome.feed, ["tms_company", "order_cnt"]) if v]
    assert per_version == [
        [("+I", "ZhongTong", 1)],
        [("+I", "YuanTong", 1)],
        [("+U", "ZhongTong", 2), ("-U", "ZhongTong", 1)],
        [("+U", "YuanTong", 2), ("+U", "ZhongTong", 1), ("-U", "YuanTong", 1), ("-U", "ZhongTong", 2)],
    ]
