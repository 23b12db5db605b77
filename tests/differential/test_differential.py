"""lockstep against Flink SQL, in the test suite: every saved regression case (replayed against
the Flink answer saved with it, no PyFlink needed) and a small fixed-seed sample of random cases
against the live oracle (`make differential` runs hundreds), each on both engines, a window case
and a session case with changes behind the watermark, and the sample again with lockstep reading
the changelogs from Kafka topics (Flink reads the files)."""

from __future__ import annotations

import dataclasses

import pytest

from tests.differential.compare import compare
from tests.differential.generate import BUILDERS, generate
from tests.differential.lockstep_side import run_lockstep
from tests.differential.oracle import FlinkOracle
from tests.differential.saved import load_regressions

REGRESSIONS = load_regressions()
SAMPLE_SEED = 20261124
SAMPLE_ROWS = 200  # small cases: the sample runs on every `make test`
SAMPLE = [(builder, SAMPLE_SEED + i) for i, builder in enumerate(BUILDERS)]


def _first_with_late_changes(builder: str, seed: int) -> int:
    """The first seed from `seed` whose small case has changes the watermark drops."""
    while not any(s.late for s in generate(builder, seed, max_rows=SAMPLE_ROWS).sources):
        seed += 1
    return seed


LATE_SAMPLE = [(b, _first_with_late_changes(b, SAMPLE_SEED + 2000)) for b in ("window", "session_window")]
# One case per class, and a window case and a session case with changes the watermark drops.
SAMPLE_WITH_LATE = SAMPLE + LATE_SAMPLE


ENGINES = ["local", "spark"]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("regression", REGRESSIONS, ids=[r.path.stem for r in REGRESSIONS])
def test_a_saved_case_agrees_with_flinks_saved_answer(spark, tmp_path, regression, engine, request):
    case = dataclasses.replace(regression.case, engine=engine)
    broker = request.getfixturevalue("kafka") if case.source_kind == "kafka" else None
    finding = compare(case, run_lockstep(case, tmp_path, broker=broker), regression.reference)
    if regression.defect:
        assert not finding.passed, f"{regression.path.name} passes now: remove its defect mark ({regression.defect})"
        pytest.xfail(f"open defect: {regression.defect}")
    assert finding.passed, f"{regression.path.name}: {finding.reason}"


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    with FlinkOracle(tmp_path_factory.mktemp("flink")) as running:
        yield running


ENGINE_SAMPLE = [(e, b, s) for e in ENGINES for b, s in SAMPLE_WITH_LATE]  # every class runs on both engines


@pytest.mark.slow
@pytest.mark.parametrize("engine, builder, seed", ENGINE_SAMPLE, ids=[f"{b}-{s}-{e}" for e, b, s in ENGINE_SAMPLE])
def test_a_random_case_agrees_with_flink(spark, tmp_path, oracle, builder, seed, engine):
    case = dataclasses.replace(generate(builder, seed, max_rows=SAMPLE_ROWS), engine=engine)
    finding = compare(case, run_lockstep(case, tmp_path), oracle.ask(case))
    late = sum(len(s.late) for s in case.sources)
    assert finding.passed, f"{case.name} ({case.size} rows, {late} late): {finding.reason}"


KAFKA_SAMPLE = [(builder, SAMPLE_SEED + 1000 + i) for i, builder in enumerate(BUILDERS)]


@pytest.mark.slow
@pytest.mark.parametrize("builder, seed", KAFKA_SAMPLE, ids=[f"{b}-{s}" for b, s in KAFKA_SAMPLE])
def test_a_random_case_read_from_kafka_topics_agrees_with_flink(spark, tmp_path, oracle, kafka, builder, seed):
    case = dataclasses.replace(generate(builder, seed, max_rows=SAMPLE_ROWS), source_kind="kafka")
    finding = compare(case, run_lockstep(case, tmp_path, broker=kafka), oracle.ask(case))
    assert finding.passed, f"{case.name} ({case.size} rows, from Kafka topics): {finding.reason}"
