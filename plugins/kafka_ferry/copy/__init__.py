"""The copy data path: plan a batch, copy partitions (inside Spark tasks or directly), write syncs and progress.

Nothing here imports Airflow or pyspark: the Spark job ships this package to executors as a zip, and the
same code runs in tests without Spark. Airflow-side wiring lives in ``kafka_ferry.operators.copy``.
"""
