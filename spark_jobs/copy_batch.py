"""spark-submit entry point of a copy batch, kept for the repository's layout: the job is the package's
``kafka_ferry.copy.spark_job`` (``python -m kafka_ferry.copy.spark_job`` does the same)."""

import sys

from kafka_ferry.copy.spark_job import main

if __name__ == "__main__":
    sys.exit(main())
