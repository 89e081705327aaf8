"""What Airflow's ProvidersManager reads of this package: its connection types (with the connection form's fields),
and the hook behind each; found through the ``apache_airflow_provider`` entry point (pyproject.toml).

Why a provider and not only a plugin: Airflow knows a connection type only from a provider's metadata. Without it
``airflow connections add --conn-type schemaregistry`` is refused ("overriding the conn-type with generic") and the
UI's connection form has no type to offer and no fields for it. Why the name is ``schemaregistry``, and why the
first name ``schema_registry`` still works but is not offered in the form: ``core.specs.connection_types``.

The form fields are declared here, not through the hook's ``get_ui_field_behaviour`` / ``get_connection_form_widgets``
(deprecated since Airflow 3.2: they import the hook, and wtforms, to draw a form). Imports only names.
"""

from __future__ import annotations

from typing import Any

from kafka_ferry.core.specs.connection_types import EVIDENCE_SIGNING, SCHEMA_REGISTRY

PACKAGE_NAME = "kafka-ferry"


def get_provider_info() -> dict[str, Any]:
    """The provider's metadata, in the shape of Airflow's ``provider_info.schema.json`` (a unit test validates it)."""
    return {
        "package-name": PACKAGE_NAME,
        "name": "kafka-ferry",
        "description": "Migrates Kafka topics, consumer groups and schemas between clusters in batch windows, "
                       "the data path on Spark.",
        "integrations": [{"integration-name": "kafka-ferry", "external-doc-url": "https://kafka.apache.org/",
                          "tags": ["apache"]}],
        "hooks": [{"integration-name": "kafka-ferry",
                   "python-modules": ["kafka_ferry.hooks.kafka_cluster", "kafka_ferry.hooks.schema_registry",
                                      "kafka_ferry.hooks.evidence_signing"]}],
        "connection-types": [{
            "connection-type": SCHEMA_REGISTRY,
            "hook-class-name": "kafka_ferry.hooks.schema_registry.SchemaRegistryHook",
            "hook-name": "Schema Registry (kafka-ferry)",
            "ui-field-behaviour": {
                "hidden-fields": [],
                "relabeling": {"host": "Registry URL", "schema": "Path"},
                "placeholders": {"host": "https://schema-registry:8081 or http://127.0.0.1:8080/apis/ccompat/v7",
                                 "login": "basic auth user (optional)", "password": "basic auth password (optional)",
                                 "schema": "path after host:port, when host is a bare name (optional)"},
            },
            "conn-fields": {
                "bearer_token": {"label": "Bearer token",
                                 "description": "instead of login/password; never logged",
                                 "schema": {"type": ["string", "null"], "format": "password"}},
                "ca_path": {"label": "CA bundle path",
                            "description": "a PEM file of the CAs that sign the registry's certificate",
                            "schema": {"type": ["string", "null"]}},
                "timeout_s": {"label": "Timeout (s)", "description": "per request; default 30",
                              "schema": {"type": ["number", "null"], "minimum": 0}},
            },
        }, {
            "connection-type": EVIDENCE_SIGNING,
            "hook-class-name": "kafka_ferry.hooks.evidence_signing.EvidenceSigningHook",
            "hook-name": "Evidence signing key (kafka-ferry)",
            "ui-field-behaviour": {
                "hidden-fields": ["host", "schema", "login", "port"],
                "relabeling": {"password": "Ed25519 private key"},
                "placeholders": {"password": "PKCS#8 PEM, or the 32-byte seed in base64"},
            },
        }],
        # No "plugins" key: the plugin is registered by the `airflow.plugins` entry point alone. Airflow loads a
        # provider's plugins too when it discovers providers eagerly (core.lazy_discover_providers = False), and a
        # second registration of one name is shown as a red "Plugin Import Error" on every page.
    }
