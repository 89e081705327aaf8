"""Fault injection for crash tests: hard-kill the copying process at a named point.

``KFERRY_FAULT="<point>:<topic>:<partition>[:<n>]"`` (several separated by ``,``) with points
``before_produce`` (when n records of the partition were produced, before the next; default n=0),
``after_produce`` (with n: once n records are acknowledged; without: all acknowledged, before the last
syncs and progress) and ``after_partition`` (progress written, before the next partition). ``os._exit`` is a
real crash: no ``finally``, no flush, no Python cleanup, exactly like a killed executor.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

FAULT_ENV = "KFERRY_FAULT"
POINTS = ("before_produce", "after_produce", "after_partition")
EXIT_CODE = 86


@dataclass(frozen=True)
class Fault:
    point: str
    topic: str
    partition: int
    count: int | None = None

    @classmethod
    def parse(cls, text: str) -> Fault:
        """Kafka topic names cannot hold ':', so the fields split unambiguously."""
        parts = text.strip().split(":")
        usage = f"{FAULT_ENV}: {text!r} is not <{'|'.join(POINTS)}>:<topic>:<partition>[:<n>]"
        if len(parts) not in (3, 4) or parts[0] not in POINTS or not parts[1]:
            raise ValueError(usage)
        try:
            numbers = [int(x) for x in parts[2:]]
        except ValueError:
            raise ValueError(usage) from None
        if len(numbers) == 1 and parts[0] == "before_produce":
            numbers.append(0)
        return cls(parts[0], parts[1], *numbers)


class Faults:
    """The faults armed for this process; ``hit`` exits the process when one matches."""

    def __init__(self, spec: str | None) -> None:
        self.faults = tuple(Fault.parse(part) for part in (spec or "").split(",") if part.strip())

    def armed(self, point: str, topic: str, partition: int, count: int | None = None) -> bool:
        """True when ``hit`` with these arguments would exit (lets the copier flush a held record first)."""
        return any((f.point, f.topic, f.partition, f.count) == (point, topic, partition, count) for f in self.faults)

    def hit(self, point: str, topic: str, partition: int, count: int | None = None) -> None:
        for fault in self.faults:
            if (fault.point, fault.topic, fault.partition, fault.count) == (point, topic, partition, count):
                sys.stderr.write(f"kafka-ferry fault injection: {point} {topic}-{partition} n={count}: exiting\n")
                sys.stderr.flush()
                os._exit(EXIT_CODE)

    def __bool__(self) -> bool:
        return bool(self.faults)
