"""The async lookup engine against a real HTTP dimension service (tests/support/dimension_server.py).

Rows are (order, customer, retract): the changes of a few orders, the customer being the lookup
key, so a -U/+U pair may change the key as an update of a real changelog does.
"""

import asyncio
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.errors import LockstepError, LookupFailed, SpecError
from jobs.lookup import AsyncLookup, LookupConfig, ServiceError, parse_output
from jobs.lookup.engine import TtlCache, emission_order
from jobs.lookup.http import HttpClient
from tests.support.dimension_server import DimensionServer

CUSTOMERS = {str(c): {"name": f"customer {c}", "tier": "gold" if c % 2 else "silver"} for c in range(100)}
ABSENT = 404  # no customer row: the service answers 404
examples = settings(max_examples=12, deadline=None)


@pytest.fixture(scope="module")
def server():
    with DimensionServer({"customers": CUSTOMERS}) as server:
        yield server


@pytest.fixture
def service(server):
    return configure(server)


def configure(server, *, latency=0.0, latency_fn=None, fail_times=None, fail_mode="error", held=None):
    """The module's server with fresh counters and only the latency and failures asked for."""
    server.tables["customers"] = dict(CUSTOMERS)
    server.latency, server.latency_fn = latency, latency_fn
    server.fail_times, server.fail_mode = dict(fail_times or {}), fail_mode
    server.held = dict(held or {})
    server.reset_counters()
    return server


def lookup(server, fetch=None, clock=None, **options) -> AsyncLookup:
    config = LookupConfig(
        name="customers",
        url=server.url + "/customers/{customer_id}",
        key=("customer_id",),
        output=parse_output("name STRING, tier STRING"),
        **options,
    )
    return AsyncLookup(config, fetch, clock=clock) if clock else AsyncLookup(config, fetch)


def run(engine: AsyncLookup, customers: list[int], retracts: list[bool] | None = None):
    keys = [(customer,) for customer in customers]
    return engine.run(keys, retracts or [False] * len(keys))


def row(customer: int) -> dict | None:
    return CUSTOMERS.get(str(customer))


@st.composite
def changelogs(draw):
    """Interleaved changes of a few orders: +I, then -U/+U pairs that may change the customer,
    maybe a -D. Each change is (order, customer, retract)."""
    customers = st.sampled_from([*range(12), ABSENT])
    histories = []
    for order in range(draw(st.integers(1, 6))):
        customer = draw(customers)
        history = [(order, customer, False)]
        for _ in range(draw(st.integers(0, 3))):
            new = draw(customers)
            history += [(order, customer, True), (order, new, False)]
            customer = new
        if draw(st.booleans()):
            history.append((order, customer, True))
        histories.append(history)
    turns = draw(st.permutations([order for order, history in enumerate(histories) for _ in history]))
    return [histories[order].pop(0) for order in turns]


latencies = st.dictionaries(
    st.sampled_from([str(c) for c in (*range(12), ABSENT)]), st.integers(0, 15).map(lambda ms: ms / 1000)
)


def run_changelog(server, changes, delays, capacity, order):
    configure(server, latency_fn=lambda key: delays.get(key, 0.0))
    engine = lookup(server, capacity=capacity, order=order)
    results = run(engine, [customer for _, customer, _ in changes], [retract for *_, retract in changes])
    assert server.max_concurrent <= capacity and engine.stats.max_in_flight <= capacity
    assert sorted(index for index, _ in results) == list(range(len(changes)))
    assert all(result == row(changes[index][1]) for index, result in results)
    return [index for index, _ in results]


@examples
@given(changes=changelogs(), delays=latencies, capacity=st.integers(1, 6))
def test_ordered_output_is_the_input_order_whatever_the_latencies(server, changes, delays, capacity):
    assert run_changelog(server, changes, delays, capacity, "ordered") == list(range(len(changes)))


@examples
@given(changes=changelogs(), delays=latencies, capacity=st.integers(1, 6))
def test_unordered_output_keeps_the_changelog_meaning(server, changes, delays, capacity):
    out = run_changelog(server, changes, delays, capacity, "unordered")
    position = {index: at for at, index in enumerate(out)}
    for earlier in range(len(changes)):
        for later in range(earlier + 1, len(changes)):
            same_order = changes[earlier][0] == changes[later][0]
            same_key = changes[earlier][1] == changes[later][1]
            retraction_first = changes[earlier][2]
            if same_order or same_key or retraction_first:
                assert position[earlier] < position[later], (changes, out)


def test_unordered_output_lets_a_fast_key_overtake_a_slow_one(service):
    configure(service, held={"1": {"3"}, "3": {"2"}})  # the service answers 2, then 3, then 1
    assert [index for index, _ in run(lookup(service, order="unordered"), [1, 2, 3])] == [1, 2, 0]
    assert [index for index, _ in run(lookup(service, order="ordered"), [1, 2, 3])] == [0, 1, 2]


def test_an_update_that_changes_the_key_is_not_overtaken_by_its_after_image(service):
    # +I (customer 1), -U (customer 1), +U (customer 2): customer 1 answers slowly, yet the +U
    # must not come out before the -U, or a sink keyed by the order would delete the new row.
    configure(service, held={"1": {"2"}})
    results = run(lookup(service, order="unordered"), [1, 1, 2], [False, True, False])
    assert [index for index, _ in results] == [0, 1, 2]


def test_emission_order_holds_rows_behind_an_earlier_retraction():
    completed = [(3, "d"), (2, "c"), (1, "b"), (0, "a")]
    retracts = [False, True, False, False]
    # 3 and 2 wait for the retraction 1; 0 may follow it (it is not its insertion: another key).
    assert emission_order(completed, retracts, "unordered") == [(1, "b"), (3, "d"), (2, "c"), (0, "a")]
    assert emission_order(completed, [False] * 4, "unordered") == completed
    assert emission_order(completed, retracts, "ordered") == completed[::-1]


def test_capacity_bounds_the_requests_in_flight_and_is_reached(service):
    configure(service, latency=0.02)
    engine = lookup(service, capacity=5)
    results = run(engine, list(range(50)))
    assert service.max_concurrent == 5 and engine.stats.max_in_flight == 5
    assert [result for _, result in results] == [row(c) for c in range(50)]


def test_the_server_serves_200_concurrent_requests(service):
    # A bare asyncio client, one connection per request: it costs far less CPU per request than
    # httpx, so all 200 are in before the first answer, even on a busy machine.
    configure(service, latency=0.5)
    statuses = asyncio.run(get_all(service, [f"/customers/{c}" for c in (*range(100), *range(1000, 1100))]))
    assert statuses == [200] * 100 + [404] * 100
    assert service.max_concurrent == 200


async def get_all(server, paths: list[str]) -> list[int]:
    async def get(path: str) -> int:
        reader, writer = await asyncio.open_connection(server.host, server.port)
        writer.write(f"GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n".encode())
        status = int((await reader.readline()).split()[1])
        await reader.read()  # the server closes the connection after its answer
        writer.close()
        return status

    return await asyncio.gather(*(get(path) for path in paths))


def test_the_http_client_reuses_connections_and_copes_with_a_server_that_closes_them(service):
    async def keep_alive() -> tuple[list[int], int]:
        # 10 workers, 20 requests each, one after the other: 10 connections carry all 200.
        client = HttpClient()

        async def worker(first: int) -> list[int]:
            return [(await client.get(f"{service.url}/customers/{c}"))[0] for c in range(first, first + 20)]

        try:
            batches = await asyncio.gather(*(worker(w * 20) for w in range(10)))
            statuses = [status for batch in batches for status in batch]
        finally:
            await client.close()
        return statuses, client.connections_opened

    statuses, connections = asyncio.run(keep_alive())
    assert statuses == [200] * 100 + [404] * 100
    assert connections <= 10 and service.requests == 200

    async def against_a_closing_server() -> tuple[list[tuple[int, bytes]], int]:
        # Answers one request per connection, then closes it; "announce" says so in a header,
        # the others close silently, with or without a Content-Length.
        async def answer(reader, writer):
            target = (await reader.readuntil(b"\r\n\r\n")).split()[1].decode()
            length = "" if target == "/eof" else "Content-Length: 2\r\n"
            close = "Connection: close\r\n" if target == "/announce" else ""
            writer.write(f"HTTP/1.1 200 OK\r\n{length}{close}\r\n{{}}".encode())
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(answer, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        client = HttpClient()
        try:
            # one after the other: a silently closed connection goes back to the pool, and the
            # next request finds it dead and retries it on a fresh connection
            answers = [await client.get(f"{url}{path}") for path in ["/announce", "/silent", "/eof"] * 3]
        finally:
            await client.close()
            server.close()
        return answers, client.connections_opened

    answers, connections = asyncio.run(against_a_closing_server())
    assert answers == [(200, b"{}")] * 9 and connections == 9


def test_rows_with_the_same_key_share_one_fetch(service):
    configure(service, latency=0.02)
    engine = lookup(service, capacity=10)
    results = run(engine, [1, 2] * 15, [False, False, True, True] * 7 + [False, False])
    assert service.requests_by_key == {"1": 1, "2": 1} and engine.stats.requests == 2
    assert all(result is results[index % 2][1] for index, result in results)


def test_a_failing_key_is_retried_until_it_answers(service):
    configure(service, fail_times={"7": 2})
    engine = lookup(service, retries=2)
    assert run(engine, [7, 8]) == [(0, row(7)), (1, row(8))]
    assert service.requests_by_key["7"] == 3
    assert engine.stats.as_dict() | {"max_in_flight": 0} == {
        "requests": 4,
        "cache_hits": 0,
        "retries": 2,
        "timeouts": 0,
        "nulls_for_errors": 0,
        "max_in_flight": 0,
    }


def test_a_key_that_times_out_on_every_attempt_fails_naming_the_key_and_the_service(service):
    configure(service, fail_times={"7": 3}, fail_mode="hang")
    engine = lookup(service, timeout_seconds=0.2, retries=2)
    with pytest.raises(LookupFailed) as failure:
        run(engine, [1, 7, 2])
    assert str(failure.value) == (
        f"lookup customers: {service.url}/customers/7 (key customer_id=7) timed out after 3 attempts (0.2 s each)"
    )
    assert isinstance(failure.value, LockstepError) and failure.value.exit_code == 2
    assert engine.stats.timeouts == 3 and engine.stats.retries == 2


def test_a_key_that_keeps_failing_names_the_last_error(service):
    configure(service, fail_times={"7": 5})
    with pytest.raises(
        LookupFailed,
        match=r"customers/7 \(key customer_id=7\) failed after 2 attempts, "
        r"the last: HTTP 500",
    ):
        run(lookup(service, retries=1), [7])


def test_on_error_null_gives_none_and_counts_the_rows(service):
    configure(service, fail_times={"7": 3})
    engine = lookup(service, retries=2, on_error="null", cache_max_rows=10)
    assert run(engine, [7, 1, 7]) == [(0, None), (1, row(1)), (2, None)]
    assert engine.stats.nulls_for_errors == 2
    assert run(engine, [7]) == [(0, row(7))]  # a failure is not cached: asked again, it answers


def test_the_cache_answers_a_second_run_and_expires_after_its_ttl(service):
    now = [100.0]
    engine = lookup(service, clock=lambda: now[0], cache_max_rows=10, cache_ttl_seconds=0.3)
    first = run(engine, [1, 2, ABSENT])
    service.set("customers", 1, {"name": "renamed", "tier": "gold"})
    now[0] += 0.29
    assert run(engine, [1, 2, ABSENT]) == first  # missing keys are cached too
    assert service.requests == 3 and engine.stats.cache_hits == 3
    now[0] += 0.02
    assert run(engine, [1])[0][1]["name"] == "renamed"
    assert service.requests == 4


def test_the_cache_evicts_the_least_recently_used_row():
    now = [0.0]
    cache = TtlCache(max_rows=2, ttl_seconds=10, clock=lambda: now[0])
    cache.put((1,), {"n": 1})
    cache.put((2,), {"n": 2})
    assert cache.get((1,)) == {"n": 1}  # 1 is now the most recently used
    cache.put((3,), {"n": 3})
    assert cache.get((2,), "miss") == "miss" and len(cache) == 2
    now[0] = 10.0
    assert cache.get((1,), "miss") == "miss"


def test_a_missing_row_is_none_and_not_an_error(service):
    engine = lookup(service)
    assert run(engine, [ABSENT]) == [(0, None)]
    assert engine.stats.retries == 0 and engine.stats.nulls_for_errors == 0


def test_an_empty_batch_asks_nothing(service):
    engine = lookup(service)
    assert engine.run([], []) == [] and engine.stats.requests == 0 and service.requests == 0


def test_key_values_are_url_quoted(service):
    service.set("customers", "a b/c?d", {"name": "slashed", "tier": "x"})
    config = LookupConfig(
        name="customers",
        url=service.url + "/customers/{customer_id}",
        key=("customer_id",),
        output=parse_output("name STRING"),
    )
    assert AsyncLookup(config).run([("a b/c?d",)], [False]) == [(0, {"name": "slashed"})]


def test_run_works_from_a_worker_thread(service):
    results = []
    worker = threading.Thread(target=lambda: results.extend(run(lookup(service), [1, 2])))
    worker.start()
    worker.join(10)
    assert results == [(0, row(1)), (1, row(2))]


def test_a_custom_fetch_is_retried_on_service_errors_only(service):
    calls = []

    async def flaky(key):
        calls.append(key)
        if len(calls) == 1:
            raise ServiceError("warming up")
        return {"name": f"fetched {key[0]}"}

    assert run(lookup(service, fetch=flaky), [5]) == [(0, {"name": "fetched 5"})]
    assert len(calls) == 2

    async def broken(key):
        raise KeyError("a bug, not an outage")

    engine = lookup(service, fetch=broken)
    with pytest.raises(KeyError):
        run(engine, [5])
    assert engine.stats.requests == 1


def test_parse_output_reads_spark_ddl():
    assert parse_output("name STRING, tier string, score double, visits BIGINT") == (
        ("name", "STRING"),
        ("tier", "STRING"),
        ("score", "DOUBLE"),
        ("visits", "BIGINT"),
    )


@pytest.mark.parametrize(
    "options, message",
    [
        ({"order": "sorted"}, "lookup customers: order must be one of ordered, unordered, not 'sorted'"),
        ({"on_error": "skip"}, "on_error must be one of fail, null"),
        ({"capacity": 0}, "capacity must be positive"),
        ({"retries": -1}, "must not be negative"),
        ({"url": "http://h/customers/{id}"}, "url placeholder {id} is not a key column (customer_id)"),
        ({"url": "http://h/customers"}, "has no placeholder for key column customer_id"),
    ],
)
def test_a_bad_config_is_a_spec_error_naming_the_lookup(options, message):
    fields = {
        "name": "customers",
        "url": "http://h/customers/{customer_id}",
        "key": ("customer_id",),
        "output": (("name", "STRING"),),
    } | options
    with pytest.raises(SpecError, match="^lookup customers: ") as error:
        LookupConfig(**fields)
    assert message in str(error.value)
