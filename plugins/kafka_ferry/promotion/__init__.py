"""Cutover: reconciliation, the resumable promotion steps, the promotion guard and report, readiness checks."""
