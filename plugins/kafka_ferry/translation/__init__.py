"""Offset translation for migrated consumer groups: decisions (pure), offset-map export, and the I/O around them."""
