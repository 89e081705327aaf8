"""OpenLineage for the copy and promotion tasks: source topics in, mirror topics out, each mirror naming its source.

Airflow's OpenLineage provider calls an operator's ``get_openlineage_facets_on_start`` / ``_on_complete`` and sends
what they return (``OperatorLineage``) through its configured transport. Naming follows OpenLineage's Kafka naming:
namespace ``kafka://<host:port>`` (the cluster's first bootstrap address), name ``<topic>``. A migrated topic changes
namespace, so each output carries a ``symlinks`` facet naming the source topic it continues: a catalogue then links
``orders`` on the new cluster to ``orders`` on the old one.
"""

from __future__ import annotations

from collections.abc import Iterable

from airflow.providers.common.compat.openlineage.facet import Dataset, Identifier, SymlinksDatasetFacet
from airflow.providers.openlineage.extractors import OperatorLineage

from kafka_ferry.core.observability.kafka_assets import check_topic, lineage_namespace

# The symlinks identifier's type for a Kafka topic (OpenLineage leaves the vocabulary open; datasets use "TABLE").
TOPIC_TYPE = "TOPIC"


def topic_lineage(source_bootstrap: str | None, destination_bootstrap: str | None,
                  pairs: Iterable[tuple[str, str]]) -> OperatorLineage:
    """``pairs``: (source topic, destination topic). Each source topic once as an input, each mirror as an output."""
    source_ns, destination_ns = lineage_namespace(source_bootstrap), lineage_namespace(destination_bootstrap)
    pairs = sorted({(check_topic(s), check_topic(d)) for s, d in pairs})
    inputs = [Dataset(namespace=source_ns, name=s) for s in sorted({s for s, _ in pairs})]
    outputs = [Dataset(namespace=destination_ns, name=d, facets={"symlinks": SymlinksDatasetFacet(
        identifiers=[Identifier(namespace=source_ns, name=s, type=TOPIC_TYPE)])}) for s, d in pairs]
    return OperatorLineage(inputs=inputs, outputs=outputs)
