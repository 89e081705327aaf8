"""Spark's Kafka source jars (spark-sql-kafka-0-10 and what it adds to pyspark's own jars), resolved once with
Maven into the test bed's jar cache, like the brokers' jars (kafka_testbed.jar_dir).

Only the jars pyspark does not ship are copied: the Kafka source, its token provider, kafka-clients and
commons-pool2 (Hadoop, Scala, lz4, snappy and slf4j come with pyspark; a second copy would clash).

    python testbed/spark_kafka_jars.py          # resolve (first time) and print the comma-separated jar list
"""

from __future__ import annotations

import sys
from pathlib import Path

from kafka_testbed import JAR_CACHE, maven_jars

ADDED = ("spark-sql-kafka-0-10_2.13", "spark-token-provider-kafka-0-10_2.13", "kafka-clients", "commons-pool2")


def spark_version() -> str:
    import pyspark

    return pyspark.__version__


def jar_dir(version: str | None = None) -> Path:
    """Resolve (once) the Kafka source jars for this Spark version."""
    version = version or spark_version()
    return maven_jars("spark-kafka-pom.xml", JAR_CACHE / f"spark-sql-kafka-{version}", version,
                      f"Spark {version}'s Kafka source jars", f"spark.version={version}",
                      f"includeArtifactIds={','.join(ADDED)}")


def jars(version: str | None = None) -> list[Path]:
    return sorted(jar_dir(version).glob("*.jar"))


if __name__ == "__main__":
    print(",".join(str(j) for j in jars(sys.argv[1] if len(sys.argv) > 1 else None)))
