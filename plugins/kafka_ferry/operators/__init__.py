"""kafka-ferry operators."""
