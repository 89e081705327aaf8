"""The one flag parser: every operator reads templated booleans through it, and they agree on "1"."""

import pytest

from kafka_ferry.core.common.flags import parse_bool


@pytest.mark.parametrize(("value", "expected"), [
    (True, True), (False, False), ("true", True), ("True", True), ("1", True), (1, True),
    ("0", False), (0, False), ("false", False), ("False", False), ("", False), (None, False),
    (" yes ", True), ("off", False),
])
def test_flag_table(value, expected):
    assert parse_bool(value) is expected


@pytest.mark.parametrize("value", ["maybe", "2", 2, 1.5])
def test_garbage_is_an_error_naming_the_value(value):
    with pytest.raises(ValueError, match=f"not a boolean flag: {value!r}"):
        parse_bool(value)
