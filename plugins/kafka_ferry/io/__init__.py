"""kafka-ferry io."""
