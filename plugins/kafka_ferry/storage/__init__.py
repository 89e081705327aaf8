"""Where the migration's files live: the work dir, a local directory or any fsspec URL through ObjectStoragePath."""
