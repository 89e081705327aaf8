"""The fences staged cutover puts on the destination, on real authorizers: a fenced group's consumer is refused
until the fence is lifted; a fenced mirror topic takes writes only from the migration's principal."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaError, Producer

from kafka_ferry.core.acls.acl_plan import AclEntry, group_read_fence, topic_write_fence
from kafka_ferry.kafka.acls import create_acls, delete_acls, describe_acls

pytestmark = pytest.mark.integration


def _produce(config: dict, topic: str):
    producer = Producer({**config, "message.timeout.ms": 15000})
    errors = []
    producer.produce(topic, b"v", on_delivery=lambda err, _m: errors.append(err))
    producer.flush(20)
    return errors[0] if errors else "undelivered"


def _consume_error(config: dict, group: str, topic: str):
    """None when the group member reads a record, else the first error it gets."""
    consumer = Consumer({**config, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        for _ in range(30):
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            return msg.error()
        return "nothing read"
    finally:
        consumer.close()


def test_group_and_topic_fences_refuse_until_lifted(private):
    destination = private.cluster("destination")
    topic = private.create_topic("destination", private.unique("fence") + ".t", 1)
    group = private.unique("fence-g")
    users = {name: private.create_principal("destination", name) for name in ("mig", "app", "reader")}
    principal = {name: f"User:{u}" for name, (u, _) in users.items()}
    config = {name: private.sasl_config("destination", *users[name]) for name in users}
    create_acls(destination, [
        AclEntry(principal["mig"], "TOPIC", topic, "WRITE"),
        AclEntry(principal["app"], "TOPIC", topic.split(".")[0], "WRITE", pattern_type="PREFIXED"),
        AclEntry(principal["reader"], "TOPIC", topic, "READ"),
        AclEntry(principal["reader"], "GROUP", group, "READ"),
    ])
    assert _produce(config["app"], topic) is None

    write_fence = topic_write_fence(topic, principal["mig"], describe_acls(destination, "TOPIC", topic,
                                                                          pattern_type="MATCH"))
    read_fence = group_read_fence(group, [principal["reader"]])
    assert write_fence == (AclEntry(principal["app"], "TOPIC", topic, "WRITE", permission="DENY"),)
    create_acls(destination, [*write_fence, *read_fence])

    assert _produce(config["app"], topic).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert _produce(config["mig"], topic) is None
    assert _consume_error(config["reader"], group, topic).code() == KafkaError.GROUP_AUTHORIZATION_FAILED

    delete_acls(destination, [*write_fence, *read_fence])  # promotion lifts them

    assert _produce(config["app"], topic) is None
    assert _consume_error(config["reader"], group, topic) is None
