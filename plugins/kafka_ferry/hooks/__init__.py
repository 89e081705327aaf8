"""kafka-ferry hooks."""
