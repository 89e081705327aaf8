"""kafka-ferry: migrate Kafka topics, consumer groups and schemas between clusters in batch windows.

`kafka_ferry.core` is pure logic (no Airflow, Kafka client or Spark imports) shared by the DAGs, the
triggerer and the Spark job; `hooks`, `operators`, `sensors` and `triggers` are the Airflow side.
"""

__version__ = "0.1.0"
