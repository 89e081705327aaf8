"""A long-running Spark Connect server on loopback, so a copy batch skips the JVM start spark-submit pays.

Why: a spark-submit batch starts a JVM, a SparkContext and Python workers every time (seconds of fixed
cost per batch). A Connect server is started once (by the test bed here, by the platform on a real
deployment) and each batch is a short client session against it. The server runs `local[N]` with the
Python in PYSPARK_PYTHON (default: the one running this script), which must have confluent-kafka.

    python testbed/spark_connect.py up [--cores 2]
    python testbed/spark_connect.py down
    python testbed/spark_connect.py status
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time

from spark_cluster import HOST, RUN_DIR, _alive, _start, stop_recorded

PORT = int(os.environ.get("KFERRY_SPARK_CONNECT_PORT", "15002"))
URL = f"sc://{HOST}:{PORT}"
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
# One pid file per port (written by _start): two sessions of one checkout on two ports never stop each other's.
SERVER_NAME = f"connect-{PORT}"
PID_FILE = RUN_DIR / f"{SERVER_NAME}.pid"


def answers() -> bool:
    try:
        with socket.create_connection((HOST, PORT), timeout=1):
            return True
    except OSError:
        return False


def up(cores: int = 2, timeout_s: float = 120.0) -> str:
    """Start the server unless it answers; wait until its gRPC port accepts connections."""
    if not answers():
        _start(SERVER_NAME, [
            "--master", f"local[{cores}]", "--class", SERVER_CLASS, "--name", "kafka-ferry-connect",
            "--conf", f"spark.default.parallelism={cores}",
            "--conf", f"spark.connect.grpc.binding.address={HOST}",
            "--conf", f"spark.connect.grpc.binding.port={PORT}",
            "--conf", "spark.ui.enabled=false",
            "spark-internal",
        ], launcher="spark-submit")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if answers():
            return URL
        if PID_FILE.exists() and not _alive(int(PID_FILE.read_text())):
            break
        time.sleep(0.5)
    log = RUN_DIR / "logs" / f"{SERVER_NAME}.log"
    raise RuntimeError(f"Spark Connect server not answering on {HOST}:{PORT}; see {log}")


def down() -> None:
    stop_recorded(PID_FILE, 20)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["up", "down", "status"])
    parser.add_argument("--cores", type=int, default=2)
    args = parser.parse_args(argv)
    if args.action == "up":
        print(up(args.cores))
    elif args.action == "down":
        down()
    else:
        print(f"Spark Connect {URL}: {'up' if answers() else 'down'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
