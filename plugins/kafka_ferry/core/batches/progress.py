"""Copy progress per source partition, as kept in the migration's state topic (``state_records.PROGRESS_KIND``).

`next_upstream_offset` is the next source offset a batch reads: every committed record below it has been
copied and acknowledged. `last_upstream_offset`/`last_downstream_offset` are the last copied record's
source and destination offsets (None before the first record), which resume and translation need.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from kafka_ferry.core.common.state_records import partition_key


@dataclass(frozen=True)
class PartitionProgress:
    source_topic: str
    partition: int
    destination_topic: str
    next_upstream_offset: int
    last_upstream_offset: int | None = None
    last_downstream_offset: int | None = None
    records_copied: int = 0
    batch_id: str = ""

    @property
    def key(self) -> str:
        return partition_key(self.source_topic, self.partition)

    def as_record(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_record(cls, value: dict[str, Any]) -> PartitionProgress:
        fields = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in value.items() if k in fields})
