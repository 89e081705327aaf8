"""Schemas between registries: plans, wire format and id rewrite, forms, compatibility, decoding and whose fault a
decode failure is."""
