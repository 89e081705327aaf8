"""Fault points parse strictly and fire only where armed (the firing itself is os._exit: see the crash tests)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kafka_ferry.copy.faults import EXIT_CODE, Fault, Faults


def test_parse_points_with_and_without_a_count():
    assert Fault.parse("after_produce:orders.v1:3") == Fault("after_produce", "orders.v1", 3, None)
    assert Fault.parse("after_produce:orders:3:150") == Fault("after_produce", "orders", 3, 150)
    assert Fault.parse("before_produce:orders:0") == Fault("before_produce", "orders", 0, 0)
    assert Fault.parse(" after_partition:t-1:2 ") == Fault("after_partition", "t-1", 2, None)


@pytest.mark.parametrize("bad", ["", "explode:t:0", "after_produce:t", "after_produce::0", "after_produce:t:x",
                                 "after_produce:t:0:1:2"])
def test_malformed_faults_are_refused_with_the_format(bad):
    with pytest.raises(ValueError, match=r"<before_produce\|after_produce\|after_partition>:<topic>:<partition>"):
        Fault.parse(bad)


def test_several_faults_and_no_fault():
    faults = Faults("after_produce:a:0, before_produce:b:1:5")
    assert [f.topic for f in faults.faults] == ["a", "b"] and faults
    assert not Faults(None) and not Faults("")


def test_a_matching_hit_kills_the_process_without_cleanup():
    code = ("import atexit; from kafka_ferry.copy.faults import Faults\n"
            "atexit.register(lambda: print('cleanup ran'))\n"
            "f = Faults('before_produce:t:0:2')\n"
            "f.hit('before_produce', 't', 0, 1); f.hit('after_produce', 't', 0, 2)\n"
            "f.hit('before_produce', 't', 1, 2)\n"
            "print('still alive'); f.hit('before_produce', 't', 0, 2); print('not reached')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == EXIT_CODE
    assert done.stdout.splitlines() == ["still alive"]  # no 'cleanup ran': a crash, not an exit
    assert "fault injection: before_produce t-0 n=2" in done.stderr
