"""Kafka clusters, below the changelog's sources (docs/kafka.md).

    servers.py  where a source's bootstrap servers come from (spec, settings, Airflow, environment)
    topic.py    a topic's partitions and offsets, asked of the broker before Spark starts

A topic's changelog is staged by jobs/changelog/kafka_source.py, and the batch step reads the
topic in jobs/batch/from_topic.py.
"""
