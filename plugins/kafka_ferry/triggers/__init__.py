"""kafka-ferry triggers."""
