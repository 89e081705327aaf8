"""kafka-ferry sensors."""
