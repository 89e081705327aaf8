"""What Airflow is told about a migration: asset and lineage names, metric names."""
