"""Samsa's data pipeline on Spark: a Kafka-protocol data source for PySpark and the page-view job.

- ``pipeline.source``: the ``samsa`` Python Data Source (batch and streaming reads and writes) for any
  Kafka-protocol broker, with the built-in ``kafka`` connector's columns and options.
- ``pipeline.options`` and ``pipeline.kafka``: its option parsing and its confluent-kafka client work.
- ``pipeline.events``, ``pipeline.transforms``, ``pipeline.job``: the activity generator, the
  DataFrame transformations and the streaming job; ``pipeline.cli`` is ``samsa pipeline``.

Only ``pipeline.events`` and ``pipeline.options`` import without the ``pipeline`` extra (PySpark,
pyarrow, pandas); see docs/pipeline.md.
"""
