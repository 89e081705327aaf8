"""Every exception class of the package derives from the one base and declares whether a retry can heal it.

Why: ``task_support.fail_fast`` and the copy job's failure records read ``permanent`` off the exception
(``core.common.failures``); a class that declares nothing is silently retried, and one outside the base cannot be told
from a library's error. The classes are found by importing every module of the package, so a new module's
exception is checked without being listed here.
"""

from __future__ import annotations

import importlib
import pkgutil

import confluent_kafka
import confluent_kafka.schema_registry.error
import pytest

import kafka_ferry
from kafka_ferry.core.common.failures import KafkaFerryError, Permanent, Retryable, retry_cannot_help
from kafka_ferry.kafka.errors import KafkaClusterError


def exception_classes() -> list[type[BaseException]]:
    found: set[type[BaseException]] = set()
    for info in pkgutil.walk_packages(kafka_ferry.__path__, "kafka_ferry."):
        if info.name.rsplit(".", 1)[-1] == "__main__":  # runs the command on import
            continue
        module = importlib.import_module(info.name)
        found.update(obj for obj in vars(module).values()
                     if isinstance(obj, type) and issubclass(obj, BaseException) and obj.__module__ == info.name)
    return sorted(found, key=lambda cls: f"{cls.__module__}.{cls.__qualname__}")


CLASSES = exception_classes()
IDS = [f"{cls.__module__}.{cls.__qualname__}" for cls in CLASSES]


def test_the_walk_finds_the_package_exceptions():
    names = set(IDS)
    for known in ("kafka_ferry.core.specs.spec_source.SpecError", "kafka_ferry.kafka.errors.KafkaClusterError",
                  "kafka_ferry.copy.delivery.CopyError", "kafka_ferry.promotion.rollback.SourceGroupBusy",
                  "kafka_ferry.hooks.schema_registry.RegistryConnectionError", "kafka_ferry.cli.UsageError"):
        assert known in names
    assert len(CLASSES) > 55


@pytest.mark.parametrize("cls", CLASSES, ids=IDS)
def test_derives_from_the_base_and_declares_permanence(cls):
    assert issubclass(cls, KafkaFerryError), f"{cls.__module__}.{cls.__qualname__} does not derive from KafkaFerryError"
    if cls in (KafkaFerryError, Permanent, Retryable):
        return
    declared_by = [k for k in cls.__mro__ if "permanent" in vars(k) and k is not KafkaFerryError]
    assert declared_by, (f"{cls.__module__}.{cls.__qualname__} declares neither Permanent nor Retryable nor a "
                         "per-instance `permanent`")
    assert isinstance(cls.permanent, bool)


def test_each_name_means_one_thing():
    """No two classes of the package share a name, and none takes a name of confluent-kafka's errors (the hook's
    error was a second ``SchemaRegistryError``)."""
    names = [cls.__name__ for cls in CLASSES]
    assert sorted(n for n in names if names.count(n) > 1) == []
    foreign = {name for module in (confluent_kafka, confluent_kafka.schema_registry.error)
               for name, obj in vars(module).items() if isinstance(obj, type) and issubclass(obj, BaseException)}
    assert "SchemaRegistryError" in foreign
    assert set(names) & foreign == set()


def test_the_declaration_is_what_retries_read():
    from kafka_ferry.core.acls.acl_plan import FenceRefused
    from kafka_ferry.promotion.rollback import SourceGroupBusy

    assert retry_cannot_help(FenceRefused("x")) and not retry_cannot_help(SourceGroupBusy("x"))
    assert isinstance(FenceRefused("x"), ValueError)  # the builtin base stays where callers catch it
    code = confluent_kafka.KafkaError
    refused = KafkaClusterError("c", "op", code(code.TOPIC_AUTHORIZATION_FAILED))
    timed_out = KafkaClusterError("c", "op", code(code._TIMED_OUT))
    assert retry_cannot_help(refused) and not retry_cannot_help(timed_out)
