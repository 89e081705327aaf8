"""The migration spec and its inputs: the YAML model, its source positions and checks, name patterns, connection types,
the tenants file, the trigger form."""
