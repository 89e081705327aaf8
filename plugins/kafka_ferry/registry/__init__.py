"""Schema Registry access: confluent-kafka's client plus the few calls it lacks."""
