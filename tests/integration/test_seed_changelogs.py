"""The seed articles' examples, exactly: dedup then COUNT(DISTINCT) (seed 000), a join with a
non-equi condition (seed 001), a join into a sink keyed by another column (seed 003)."""

from __future__ import annotations

from tests.conftest import write_changelog, write_spec
from tests.integration.conftest import run_both

FEED_KINDS = {"insert": "+I", "update_preimage": "-U", "update_postimage": "+U", "delete": "-D"}


def feed_sequence(feed, columns):
    """The change feed as one list per commit version (= per micro-batch), each version's changes
    sorted: a MERGE writes the rows of one commit in no fixed order."""
    rows = feed.to_pylist()
    return [
        sorted(
            (
                (FEED_KINDS[r["_change_type"]],) + tuple(r[c] for c in columns)
                for r in rows
                if r["_commit_version"] == version
            ),
            key=repr,
        )
        for version in sorted({r["_commit_version"] for r in rows})
    ]


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
    write_changelog(
        tmp_path / "source",
        "orders.json",
        [{"order_id": o, "tms_company": c, "seq": i} for i, (o, c) in enumerate(events)],
    )
    outcome = run_both(write_spec(tmp_path, SEED_000), tmp_path / "runs")
    assert (
        outcome.stream
        == outcome.batch
        == [{"tms_company": "YuanTong", "order_cnt": 2}, {"tms_company": "ZhongTong", "order_cnt": 1}]
    )
    per_version = [v for v in feed_sequence(outcome.feed, ["tms_company", "order_cnt"]) if v]
    assert per_version == [
        [("+I", "ZhongTong", 1)],
        [("+I", "YuanTong", 1)],
        [("+U", "ZhongTong", 2), ("-U", "ZhongTong", 1)],
        [("+U", "YuanTong", 2), ("+U", "ZhongTong", 1), ("-U", "YuanTong", 1), ("-U", "ZhongTong", 2)],
    ]


def test_seed_000_as_written_ranks_by_a_column_its_select_leaves_out(tmp_path, spark):
    # The article's inner SELECT keeps order_id and tms_company only and orders by another column.
    events = [("001", "ZhongTong"), ("002", "YuanTong"), ("003", "ZhongTong"), ("001", "YuanTong")]
    write_changelog(
        tmp_path / "source",
        "orders.json",
        [{"order_id": o, "tms_company": c, "seq": i} for i, (o, c) in enumerate(events)],
    )
    as_written = SEED_000.replace("SELECT order_id, tms_company, seq,", "SELECT order_id, tms_company,")
    outcome = run_both(write_spec(tmp_path, as_written), tmp_path / "runs")
    assert (
        outcome.stream
        == outcome.batch
        == [{"tms_company": "YuanTong", "order_cnt": 2}, {"tms_company": "ZhongTong", "order_cnt": 1}]
    )
    per_version = [v for v in feed_sequence(outcome.feed, ["tms_company", "order_cnt"]) if v]
    assert per_version == [  # the article's changelog, commit by commit
        [("+I", "ZhongTong", 1)],
        [("+I", "YuanTong", 1)],
        [("+U", "ZhongTong", 2), ("-U", "ZhongTong", 1)],
        [("+U", "YuanTong", 2), ("+U", "ZhongTong", 1), ("-U", "YuanTong", 1), ("-U", "ZhongTong", 2)],
    ]


def test_top_n_retracts_the_row_that_falls_out_and_renumbers_the_rest(tmp_path, spark):
    write_changelog(
        tmp_path / "source",
        "scores.json",
        [
            {"player": "a", "game": "g", "score": 10, "op": "+I"},
            {"player": "b", "game": "g", "score": 20, "op": "+I"},
            {"player": "c", "game": "g", "score": 30, "op": "+I"},  # a falls out of the top 2
            {"player": "c", "game": "g", "score": 30, "op": "-D"},  # and comes back
        ],
    )
    spec = write_spec(
        tmp_path,
        """
        name: top2
        sql: |
          SELECT game, player, score, rn FROM (
            SELECT game, player, score, ROW_NUMBER() OVER (PARTITION BY game ORDER BY score DESC) AS rn
            FROM source) WHERE rn <= 2
        sources:
          source:
            path: source
            format: changelog-json
            schema: "player STRING, game STRING, score BIGINT"
            primary_key: [player]
        stream:
          rows_per_batch: 1
        """,
    )
    outcome = run_both(spec, tmp_path / "runs")
    assert (
        outcome.stream
        == outcome.batch
        == [{"game": "g", "player": "a", "score": 10, "rn": 2}, {"game": "g", "player": "b", "score": 20, "rn": 1}]
    )
    per_version = [v for v in feed_sequence(outcome.feed, ["rn", "player"]) if v]
    assert per_version == [
        [("+I", 1, "a")],
        [("+I", 2, "a"), ("+U", 1, "b"), ("-U", 1, "a")],  # b takes rank 1, a moves to 2
        [("+U", 1, "c"), ("+U", 2, "b"), ("-U", 1, "b"), ("-U", 2, "a")],  # c first: a falls out
        [("+U", 1, "b"), ("+U", 2, "a"), ("-U", 1, "c"), ("-U", 2, "b")],  # c goes: a is back
    ]


def _two_sources(tmp_path, sql, a_schema, b_schema, *, a_key=(), b_key=(), sink=None, rows_per_batch=1):
    import yaml

    spec = {
        "name": "j",
        "sql": sql,
        "sources": {
            "a": {"path": "a", "format": "changelog-json", "schema": a_schema, "primary_key": list(a_key)},
            "b": {"path": "b", "format": "changelog-json", "schema": b_schema, "primary_key": list(b_key)},
        },
        "stream": {"rows_per_batch": rows_per_batch},
    }
    if sink:
        spec["sink"] = sink
    path = tmp_path / "j.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def test_seed_001_join_with_a_non_equi_condition(tmp_path, spark):
    sql = "SELECT a.name, a.cnt * b.price AS money FROM a JOIN b ON a.name = b.name AND a.cnt > b.price"
    write_changelog(
        tmp_path / "a", "1.json", [{"op": "+I", "name": "x", "cnt": 5}, {"op": "+I", "name": "y", "cnt": None}]
    )
    write_changelog(
        tmp_path / "b",
        "1.json",
        [
            {"op": "+I", "name": "x", "price": 3},
            {"op": "+I", "name": "x", "price": 7},
            {"op": "+I", "name": "y", "price": 1},
        ],
    )
    spec = _two_sources(
        tmp_path, sql, "name STRING, cnt INT", "name STRING, price INT", sink={"changelog_mode": "retract"}
    )
    outcome = run_both(spec, tmp_path / "runs")
    assert [(r["name"], r["money"], r["__count"]) for r in outcome.stream] == [("x", 15, 1)]
    assert outcome.batch == [{"name": "x", "money": 15}]


def test_left_join_retracts_the_padded_row_when_a_match_comes_and_restores_it(tmp_path, spark):
    """Seed 001's matched-count rules, one change per micro-batch."""
    sql = "SELECT a.k, a.v, b.id AS b_id, b.w FROM a LEFT JOIN b ON a.k = b.k"
    write_changelog(tmp_path / "a", "1.json", [{"op": "+I", "k": 1, "v": "x"}])
    write_changelog(
        tmp_path / "b",
        "1.json",
        [
            {"op": "+I", "id": 9, "k": 2, "w": "z"},
            {"op": "+I", "id": 10, "k": 1, "w": "p"},
            {"op": "+I", "id": 11, "k": 1, "w": "q"},
            {"op": "-D", "id": 10, "k": 1, "w": "p"},
            {"op": "-D", "id": 11, "k": 1, "w": "q"},
        ],
    )
    spec = _two_sources(
        tmp_path,
        sql,
        "k BIGINT, v STRING",
        "id BIGINT, k BIGINT, w STRING",
        a_key=("k",),
        b_key=("id",),
        sink={"primary_key": ["k", "b_id"]},
    )
    outcome = run_both(spec, tmp_path / "runs")
    assert outcome.stream == outcome.batch == [{"k": 1, "v": "x", "b_id": None, "w": None}]
    versions = [v for v in feed_sequence(outcome.feed, ["k", "b_id", "w"]) if v]
    assert versions == [
        [("+I", 1, None, None)],  # a's row alone: padded
        [("+I", 1, 10, "p"), ("-D", 1, None, None)],  # the first match retracts the padded row
        [("+I", 1, 11, "q")],
        [("-D", 1, 10, "p")],
        [("+I", 1, None, None), ("-D", 1, 11, "q")],
    ]


def test_seed_003_join_into_a_sink_keyed_by_the_left_key_ends_with_the_new_level(tmp_path, spark):
    sql = "SELECT s1.*, s2.attr FROM s1 JOIN s2 ON s1.level = s2.id"
    import yaml

    spec = {
        "name": "t1",
        "sql": sql,
        "sources": {
            "s1": {
                "path": "s1",
                "format": "changelog-json",
                "schema": "id BIGINT, level BIGINT",
                "primary_key": ["id"],
            },
            "s2": {"path": "s2", "format": "changelog-json", "schema": "id BIGINT, attr STRING", "primary_key": ["id"]},
        },
        "sink": {"primary_key": ["id"]},
        "stream": {"rows_per_batch": 10},
    }
    (tmp_path / "t1.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    write_changelog(
        tmp_path / "s2", "1.json", [{"op": "+I", "id": 10, "attr": "a1"}, {"op": "+I", "id": 20, "attr": "b1"}]
    )
    write_changelog(
        tmp_path / "s1",
        "1.json",
        [{"op": "+I", "id": 1, "level": 10}, {"op": "-U", "id": 1, "level": 10}, {"op": "+U", "id": 1, "level": 20}],
    )
    from jobs.plan import plan_query
    from jobs.spec import load_spec

    assert plan_query(load_spec(tmp_path / "t1.yaml")).materialize
    outcome = run_both(tmp_path / "t1.yaml", tmp_path / "runs")
    assert outcome.stream == outcome.batch == [{"id": 1, "level": 20, "attr": "b1"}]
