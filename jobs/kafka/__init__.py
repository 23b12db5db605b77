"""Kafka topics as changelog sources (docs/kafka.md).

servers.py  where a source's bootstrap servers come from (spec, settings, Airflow, environment)
topic.py    a topic's partitions and offsets, asked of the broker before Spark starts
source.py   staging a topic's new offsets, and the offsets a consistency point reached
batch.py    the batch step's read of the topic up to exactly those offsets
"""
