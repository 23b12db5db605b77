"""An Apache Kafka broker on 127.0.0.1 in KRaft mode (its own controller, no ZooKeeper), run from
the jars setup fetched (scripts/kafka-jars.sh) as its own JVM, for `lockstep demo --local-kafka`
and the tests: the storage is formatted with a new cluster id, then the broker starts and serves
once its port accepts connections. `restart()` stops it and starts it again on the same ports and
data, as a broker restarted between two runs.

Its two ports are picked just before it starts; a port taken in between makes the JVM exit, and
the start is tried again on new ones. The JVM gets a parent-death signal, so a test process killed
outright takes its broker along; `stop()` ends it in the ordinary case, and the context manager
calls it whatever happens.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from jobs.cli.local_store import LocalServer, _dies_with_parent, ended, free_port, until_interrupted

JARS = Path(sys.prefix) / "jars" / "kafka-broker"


class KafkaBroker(LocalServer):
    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.port = self.controller_port = self.runs = 0
        self.process: subprocess.Popen | None = None
        self.properties = workdir / "server.properties"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, attempts: int = 3, timeout: float = 90) -> None:
        for attempt in range(attempts):
            self.port, self.controller_port = free_port(), free_port()
            self.properties = self._write_properties(attempt)
            self._tool("kafka.tools.StorageTool", "format", "-t", self._cluster_id(), "-c", str(self.properties))
            if self._run(timeout):
                return
            self.stop()
        raise RuntimeError(f"no Kafka broker served in {attempts} attempts (logs in {self.workdir})")

    def restart(self, timeout: float = 90) -> None:
        """Stop the broker and start it again with its ports, data and topics."""
        self.stop()
        if not self._run(timeout):
            raise RuntimeError(f"the Kafka broker did not serve again after a restart (logs in {self.workdir})")

    def _run(self, timeout: float) -> bool:
        self.runs += 1
        log = (self.workdir / f"broker-{self.runs}.log").open("w")
        self.process = subprocess.Popen(
            self._java("kafka.Kafka", str(self.properties)),
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=_dies_with_parent,
        )
        return self._wait_until_serving(timeout)

    def stop(self) -> None:
        if self.process is not None:
            ended(self.process, wait=20)
        self.process = None

    def create_topic(self, topic: str, partitions: int = 1, config: dict[str, str] | None = None) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        done = admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})], operation_timeout=30)
        done[topic].result(timeout=60)

    def produce(
        self,
        topic: str,
        messages: Sequence[tuple[str | None, str | None]],
        at: datetime | None = None,
        partition: int | None = None,
    ) -> None:
        """Keyed messages, in order (a key's messages go to one partition, in this order); a None
        value is a tombstone. `at` stamps them with that time instead of now; `partition` puts
        them in that partition instead of their key's."""
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "enable.idempotence": True,  # retries keep a partition's order
                "partitioner": "murmur2_random",  # the Java client's (Debezium's Kafka Connect) key to partition
                "linger.ms": 20,
                "log_level": 3,  # not the retries while a new broker's coordinator loads
            }
        )
        stamp = int(at.timestamp() * 1000) if at is not None else 0
        where = {} if partition is None else {"partition": partition}
        for key, value in messages:
            while True:
                try:
                    producer.produce(topic, value=value, key=key, timestamp=stamp, **where)  # type: ignore[arg-type]
                    break
                except BufferError:  # the client's queue is full: let it deliver some first
                    producer.poll(0.1)
            producer.poll(0)
        left = producer.flush(60)
        if left:
            raise RuntimeError(f"{left} message(s) to {topic} were not delivered")

    def _write_properties(self, attempt: int) -> Path:
        data = self.workdir / f"data-{attempt}"
        path = self.workdir / f"server-{attempt}.properties"
        self.workdir.mkdir(parents=True, exist_ok=True)
        path.write_text(
            "\n".join(
                [
                    "process.roles=broker,controller",
                    "node.id=1",
                    f"controller.quorum.voters=1@127.0.0.1:{self.controller_port}",
                    f"listeners=PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
                    f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}",
                    "controller.listener.names=CONTROLLER",
                    "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                    "inter.broker.listener.name=PLAINTEXT",
                    f"log.dirs={data}",
                    "offsets.topic.replication.factor=1",
                    "transaction.state.log.replication.factor=1",
                    "transaction.state.log.min.isr=1",
                    "group.initial.rebalance.delay.ms=0",
                    "log.cleaner.backoff.ms=500",  # a compacted topic is compacted within seconds
                ]
            )
            + "\n"
        )
        return path

    def _cluster_id(self) -> str:
        return self._tool("kafka.tools.StorageTool", "random-uuid").strip().splitlines()[-1]

    def _wait_until_serving(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                return False  # a port was taken, or the broker failed: the log says which
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return True
            except OSError:
                time.sleep(0.25)
        return False

    def _java(self, main_class: str, *args: str) -> list[str]:
        return ["java", "-Xmx512m", "-cp", f"{JARS}/*", main_class, *args]

    def _tool(self, main_class: str, *args: str, stdin: str | None = None) -> str:
        done = subprocess.run(self._java(main_class, *args), input=stdin, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{main_class} {' '.join(args[:2])} failed: {done.stdout[-500:]}{done.stderr[-1500:]}")
        return done.stdout


def main() -> None:
    """`python -m jobs.cli.local_kafka [DIR]`: a local Kafka broker, its setting printed, until
    Ctrl-C."""
    import tempfile

    workdir = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="lockstep-local-kafka-"))
    with KafkaBroker(workdir) as broker:
        print(f"local Kafka broker on {broker.bootstrap}, logs and data in {workdir}; Ctrl-C stops it. Its setting:")
        print(f"  export LOCKSTEP_KAFKA_BOOTSTRAP_SERVERS={broker.bootstrap}")
        until_interrupted()


if __name__ == "__main__":
    main()
