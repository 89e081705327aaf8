"""Airflow DAG of the kafka-ferry migration demo-tenant.yaml (written by `make dags`)."""
from kafka_ferry.dag_factory import dag_from_yaml

dag = dag_from_yaml(__file__, "migrations/demo-tenant.yaml")
