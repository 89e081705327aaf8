"""What provisioning would change: mirror topics and groups, which topics the migration owns, record timestamps."""
