"""The one Kafka cluster client, without Airflow."""
