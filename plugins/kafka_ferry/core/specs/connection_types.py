"""The Airflow connection types a spec's fields accept, by name only (core: no Airflow import).

The registry's type is ``schemaregistry``: a connection type is a URI scheme (RFC 3986 allows no ``_``; Airflow
warns on every ``_`` it prints as a URI and reads a ``-`` in a URI back as ``_``). Its first name,
``schema_registry``, stays accepted everywhere, so the connections made with it keep working. ``spark_connect`` is
the Spark provider's own type: its name is not ours to change.
"""

from __future__ import annotations

KAFKA = "kafka"
SPARK = "spark"
SPARK_CONNECT = "spark_connect"
SCHEMA_REGISTRY = "schemaregistry"
LEGACY_SCHEMA_REGISTRY = "schema_registry"
# the evidence bundle's Ed25519 private key, in the password (core.cutover.evidence)
EVIDENCE_SIGNING = "evidencesigning"

KAFKA_TYPES = (KAFKA,)
SPARK_TYPES = (SPARK, SPARK_CONNECT)
SCHEMA_REGISTRY_TYPES = (SCHEMA_REGISTRY, LEGACY_SCHEMA_REGISTRY)
