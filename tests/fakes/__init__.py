"""In-memory fakes of the cluster, the state store and the schema registry, for unit tests (no brokers, no HTTP).

Each implements its ``Protocol`` (``kafka.protocol.Cluster``, ``state.protocol.StateStore``,
``registry.protocol.Registry``) and ``tests/integration/test_fakes_contract.py`` holds it to the real one's answers.
"""
