"""The test tree collects as one suite: `make test` runs unit and integration tests in one pytest session, where
test folders are no packages, so two test modules with one basename fail the whole collection (a subset run by
folder does not show it)."""

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_two_test_modules_share_a_basename():
    names = Counter(p.name for p in TESTS.rglob("test_*.py"))
    assert not [n for n, count in names.items() if count > 1], "rename one of each pair (e.g. add _live)"
