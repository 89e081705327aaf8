"""What Airflow gives every well-behaved provider: topics as Assets, OpenLineage lineage, metrics (issue 29).

Thin over ``core.observability.kafka_assets`` (the names, pure): these modules only turn them into Airflow objects and
calls.
"""
