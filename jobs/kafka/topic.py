"""A topic's partitions and offsets, asked of its broker with a Kafka client before Spark reads
anything: a broker that does not answer is one line and exit 2 within the settings' timeout,
rather than Spark's minute of retries.

Offsets are Kafka's: a partition's `low` is its first retained offset, `high` the offset its next
message will get.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime

from confluent_kafka import Consumer, KafkaException, TopicPartition

from jobs.errors import InputError


@dataclass(frozen=True)
class Watermarks:
    low: int
    high: int


class Topic:
    """One topic on one cluster; `where` names the source in every message."""

    def __init__(self, servers: str, topic: str, timeout: float, where: str):
        self.servers, self.name, self.timeout, self.where = servers, topic, timeout, where

    @functools.cached_property
    def _client(self) -> Consumer:
        return Consumer(
            {
                "bootstrap.servers": self.servers,
                "group.id": "lockstep-offsets",  # never joins nor commits: it only asks for offsets
                "enable.auto.commit": False,
                "socket.connection.setup.timeout.ms": int(self.timeout * 1000),
                "log_level": 0,  # its connection errors are reported here, once, not logged per retry
            }
        )

    def close(self) -> None:
        if "_client" in self.__dict__:
            self._client.close()
            del self.__dict__["_client"]

    def __enter__(self) -> Topic:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def partitions(self) -> list[int]:
        """The topic's partitions; a broker that does not answer, or a topic it does not have, is
        an InputError."""
        try:
            metadata = self._client.list_topics(self.name, timeout=self.timeout)
        except KafkaException as exc:
            raise self._unreachable(exc) from None
        found = metadata.topics.get(self.name)
        if found is None or found.error is not None or not found.partitions:
            reason = found.error.str() if found is not None and found.error is not None else "not found"
            raise InputError(f"Kafka topic {self.name!r} on {self.servers}: {reason}", where=self.where)
        return sorted(found.partitions)

    def watermarks(self, partition: int) -> Watermarks:
        try:
            low, high = self._client.get_watermark_offsets(
                TopicPartition(self.name, partition), timeout=self.timeout, cached=False
            )
        except KafkaException as exc:
            raise self._unreachable(exc) from None
        return Watermarks(low, high)

    def offsets_at(self, partitions: list[int], moment: datetime) -> dict[int, int]:
        """Per partition, the first offset whose message timestamp is at or after `moment`; the
        high watermark where every message is older."""
        millis = int(moment.timestamp() * 1000)
        asked = [TopicPartition(self.name, p, millis) for p in partitions]
        try:
            answered = self._client.offsets_for_times(asked, timeout=self.timeout)
        except KafkaException as exc:
            raise self._unreachable(exc) from None
        return {tp.partition: tp.offset if tp.offset >= 0 else self.watermarks(tp.partition).high for tp in answered}

    def _unreachable(self, exc: KafkaException) -> InputError:
        reason = exc.args[0].str() if exc.args and hasattr(exc.args[0], "str") else str(exc)
        return InputError(
            f"Kafka broker {self.servers} did not answer within {self.timeout:g} s ({reason})", where=self.where
        )
