"""Airflow DAG of the kafka-ferry migration in demo-tenant.yaml (written by `make dags`; logic in kafka_ferry)."""
from kafka_ferry.dag_factory import dag_from_yaml

dag = dag_from_yaml(__file__, "migrations/demo-tenant.yaml")
