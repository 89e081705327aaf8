"""Both clusters' configs reach the job in one environment variable; errors never echo its value."""

from __future__ import annotations

import pytest

from kafka_ferry.kafka.configs import CLUSTER_CONFIGS_ENV, encode_cluster_configs, load_cluster_configs

SECRET = "s3cr3t-password"


def test_round_trip():
    value = encode_cluster_configs({"bootstrap.servers": "a:1", "sasl.password": SECRET}, {"bootstrap.servers": "b:2"})
    assert load_cluster_configs({CLUSTER_CONFIGS_ENV: value}) == {
        "source": {"bootstrap.servers": "a:1", "sasl.password": SECRET}, "destination": {"bootstrap.servers": "b:2"}}


@pytest.mark.parametrize(("value", "problem"), [
    (None, "is not set"),
    ("{not json " + SECRET, "is not valid JSON"),
    ('{"source": {"bootstrap.servers": "a"}}', "with 'source' and 'destination' objects"),
    ('{"source": {"sasl.password": "' + SECRET + '"}, "destination": {"bootstrap.servers": "b"}}',
     "the source config has no bootstrap.servers"),
])
def test_bad_values_are_named_without_their_content(value, problem):
    environ = {} if value is None else {CLUSTER_CONFIGS_ENV: value}
    with pytest.raises(RuntimeError, match=problem) as failure:
        load_cluster_configs(environ)
    assert SECRET not in str(failure.value)
