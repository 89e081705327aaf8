"""What a migration does, in pipeline order; no Airflow imports."""
