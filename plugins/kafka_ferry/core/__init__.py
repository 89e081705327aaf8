"""Pure logic: wire codecs, offset translation, batch planning, the migration spec. No I/O imports."""
