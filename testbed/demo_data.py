"""What `make demo` seeds on the source: the demo tenant's topics, groups and volume (no side effects)."""

DEMO_TOPICS = {"demo.orders": (6, {}), "demo.payments": (3, {"cleanup.policy": "compact"})}
DEMO_GROUPS = {"demo-billing": {"demo.orders": 0.6}, "demo-audit": {"demo.orders": 0.3, "demo.payments": 0.5}}
RECORDS_PER_PARTITION = 2000
