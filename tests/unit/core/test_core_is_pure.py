"""kafka_ferry.core is shared by the DAGs, the triggerer and the Spark job: it must import none of them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import kafka_ferry.core

FORBIDDEN = ("airflow", "confluent_kafka", "pyspark")

# Runs in a clean interpreter so modules this test process already imported cannot hide a leak.
PROBE = """
import json, pkgutil, sys
import kafka_ferry.core as core
forbidden = {forbidden}
names = [m.name for m in pkgutil.walk_packages(core.__path__, core.__name__ + ".")]
leaks = {{}}  # forbidden top-level package -> first core module after whose import it appeared
for name in ["kafka_ferry.core", *names]:
    __import__(name)
    for top in {{m.split(".")[0] for m in sys.modules}} & forbidden:
        leaks.setdefault(top, name)
print(json.dumps({{"imported": names, "leaks": leaks}}))
"""


def test_core_modules_import_no_airflow_kafka_client_or_spark():
    package_root = Path(kafka_ferry.core.__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(package_root), os.environ.get("PYTHONPATH")]))}
    probe = PROBE.format(forbidden=repr(set(FORBIDDEN)))
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert {"kafka_ferry.core.offsets.mm2_wire",
            "kafka_ferry.core.offsets.offset_translation"} <= set(report["imported"])
    assert report["leaks"] == {}, f"imported by kafka_ferry.core ({{package: first module}}): {report['leaks']}"
