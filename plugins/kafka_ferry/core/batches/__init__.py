"""The copy batches: ranges, windows, rate and rate limit, backlog and ETA, live progress, the copy lease, the Spark
job's start."""
