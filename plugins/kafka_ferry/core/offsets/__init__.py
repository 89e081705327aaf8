"""Offsets across the copy: MM2's wire formats, the sync policy, translation and the final decisions, provenance, Spark
checkpoints."""
