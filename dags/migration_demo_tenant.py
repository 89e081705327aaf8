"""Airflow DAG of one kafka-ferry migration spec (written by `make dags`)."""
from kafka_ferry.dag_factory import dag_from_yaml

SPEC = 'migrations/demo-tenant.yaml'
dag = dag_from_yaml(__file__, SPEC)
