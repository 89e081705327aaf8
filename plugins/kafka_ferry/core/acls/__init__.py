"""ACLs: what the migration's principals need and the source ACLs mirrored on the destination."""
