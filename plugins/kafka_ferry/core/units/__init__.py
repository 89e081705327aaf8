"""Units that move together: coupling, Kafka Streams applications, the transaction log that shows them."""
