"""Record timestamps across the copy: the mirror topic's timestamp configs during the migration and after it.

Guarantee: every copied record keeps its source timestamp, so a time-based seek (`offsets_for_times`)
on the destination lands on the translation of the same seek on the source, and retention counts from
the original append, not from the copy.

Why the mirror is CreateTime while copying: a LogAppendTime topic stamps every record with the time
its broker appends it, so a LogAppendTime mirror would stamp each copied record with the copy time.
As CreateTime it stores the timestamp the copy produces with, which is the source's (the producer's
for CreateTime sources, the source broker's log-append time for LogAppendTime sources). At promotion the
mirror gets the source's timestamp type back, so producers after cutover get the broker's time again;
records already stored keep theirs (their batches stay CreateTime-stamped).

Why the limits are lifted while copying: a CreateTime topic rejects (INVALID_TIMESTAMP) a record older
than `message.timestamp.before.max.ms` or further ahead than `message.timestamp.after.max.ms` (before
Kafka 4.0 also beyond `message.timestamp.difference.max.ms`) from the broker's clock. Source records of
any age must be copied, so the mirror has no limit during the migration; promotion restores what the
mirror had before (an existing topic's values, or the destination broker's defaults for a topic the
migration created). The plan is recorded when the mirror is first provisioned: a later provisioning
sees the lifted limits, not the ones to restore.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"
TIMESTAMP_TYPE = "message.timestamp.type"
BEFORE_MAX_MS = "message.timestamp.before.max.ms"
AFTER_MAX_MS = "message.timestamp.after.max.ms"
DIFFERENCE_MAX_MS = "message.timestamp.difference.max.ms"  # removed in Kafka 4.0
UNLIMITED = str(2**63 - 1)  # Long.MAX_VALUE: Kafka's "no limit"


@dataclass(frozen=True)
class TopicTimePlan:
    """What the mirror topic's timestamp configs are while copying, and what promotion sets them to.

    ``at_promotion`` maps a config to its value after promotion; None removes the topic's override (the
    destination broker's default applies).
    """

    source_topic: str
    destination_topic: str
    source_timestamp_type: str
    during: Mapping[str, str]
    at_promotion: Mapping[str, str | None] = field(default_factory=dict)

    def describe(self) -> list[str]:
        """One line per decision, for the pre-flight diff and the report."""
        lines = []
        if self.source_timestamp_type == LOG_APPEND_TIME:
            lines.append(f"{self.destination_topic}: source {self.source_topic} is LogAppendTime; the mirror is "
                         f"CreateTime while copying (records keep the source's append times) and LogAppendTime "
                         f"from promotion on")
        for name in (BEFORE_MAX_MS, AFTER_MAX_MS, DIFFERENCE_MAX_MS):
            if name in self.during and name in self.at_promotion:
                restored = self.at_promotion[name] or "the destination broker's default"
                lines.append(f"{self.destination_topic}: {name} unlimited while copying (records of any age are "
                             f"kept), back to {restored} at promotion")
        return lines

    def as_record(self) -> dict[str, Any]:
        return {"source_topic": self.source_topic, "destination_topic": self.destination_topic,
                "source_timestamp_type": self.source_timestamp_type, "during": dict(self.during),
                "at_promotion": dict(self.at_promotion)}

    @classmethod
    def from_record(cls, value: Mapping[str, Any]) -> TopicTimePlan:
        return cls(value["source_topic"], value["destination_topic"], value["source_timestamp_type"],
                   dict(value["during"]), dict(value.get("at_promotion", {})))


def plan_topic_time(source_topic: str, destination_topic: str, source_configs: Mapping[str, str],
                    destination_configs: Mapping[str, str] | None,
                    recorded: TopicTimePlan | None = None) -> TopicTimePlan:
    """The timestamp configs of one mirror topic.

    ``destination_configs`` are the existing mirror's effective configs, None when provisioning creates
    it; ``recorded`` is the plan of an earlier provisioning, whose values to restore win. A new mirror
    gets the two limits every Kafka >= 3.6 knows; an existing one also has ``difference.max.ms`` lifted
    when its broker still reports it (a 3.x destination).
    """
    source_type = source_configs.get(TIMESTAMP_TYPE, CREATE_TIME)
    during = {TIMESTAMP_TYPE: CREATE_TIME}
    at_promotion: dict[str, str | None] = {}
    if source_type == LOG_APPEND_TIME:
        at_promotion[TIMESTAMP_TYPE] = LOG_APPEND_TIME
    limits = [BEFORE_MAX_MS, AFTER_MAX_MS]
    if destination_configs is not None and DIFFERENCE_MAX_MS in destination_configs:
        limits.append(DIFFERENCE_MAX_MS)
    for name in limits:
        during[name] = UNLIMITED
        if recorded is not None:
            if name in recorded.at_promotion:
                at_promotion[name] = recorded.at_promotion[name]
        elif destination_configs is None:
            at_promotion[name] = None  # a created mirror goes back to the broker's default
        elif destination_configs.get(name, UNLIMITED) != UNLIMITED:
            at_promotion[name] = destination_configs[name]
    return TopicTimePlan(source_topic, destination_topic, source_type, during, at_promotion)
