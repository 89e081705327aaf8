"""How the copier's clients are configured, and the one process setting its hot loop changes.

Each setting carries why: the delivery guarantees (``copy.delivery``) rest on the producer's, the
bounded memory on both queues' bounds, the per-partition start on the consumer's fetch wait.
"""

from __future__ import annotations

import gc
import threading
from contextlib import contextmanager

# Resume trusts the destination tail to be a prefix of what was produced, so no record may fail while a
# later one lands: gapless turns such errors fatal, and no message timeout (0 = none) means a record is
# either delivered or still queued when the task gives up (after FLUSH_TIMEOUT_S) or dies.
PRODUCER_CONFIG = {
    "enable.idempotence": True,
    "acks": "all",
    "enable.gapless.guarantee": True,
    "message.timeout.ms": 0,
    "linger.ms": 20,
    "batch.num.messages": 10000,
    "queue.buffering.max.messages": 100000,
    # What bounds the copier's memory, whatever the backlog: at most this many records and bytes queued for
    # the destination (librdkafka's defaults: 100k records, 1 GB). Either is far more than a round trip of a
    # fast copy in flight; small records are bound by the count (each carries librdkafka's own bookkeeping,
    # which the byte bound does not see).
    "queue.buffering.max.kbytes": 64 * 1024,
}
# No group commits: positions live in the state topic. An offset below the log start is an error,
# never a silent jump (retention deleted records after planning).
CONSUMER_CONFIG = {
    "isolation.level": "read_committed",
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "auto.offset.reset": "error",
    "enable.partition.eof": False,
    # One partition at a time: let each fetch bring more than the 1 MB default so the loop never waits.
    "max.partition.fetch.bytes": 8 * 1024 * 1024,
    # The prefetch queue, the other bound on memory: four fetches ahead is enough to never wait.
    "queued.max.messages.kbytes": 32 * 1024,
    "queued.min.messages": 20000,
    # The consumer is reassigned per partition, and a new partition is fetched only after the previous
    # fetch returns: with the default long poll (fetch.wait.max.ms 500), every partition started idling.
    "fetch.wait.max.ms": 10,
}
CONSUME_BATCH = 5000
STALL_TIMEOUT_S = 120.0
FLUSH_TIMEOUT_S = 120.0
METADATA_TIMEOUT_S = 10.0  # asking a topic's metadata before the first assign (PartitionCopier._learn_topic)
FAILURE_REPORTS_TIMEOUT_S = 10.0  # after a failure: how long to wait for the reports that name its cause


_pause_lock = threading.Lock()
_pausers = 0
_resume_gc = False


@contextmanager
def collector_paused():
    """Pause Python's cyclic garbage collector for one partition's hot loop, then restore it.

    Why it is safe: the loop allocates only acyclic objects (messages, header lists and tuples, chunks),
    which reference counting frees at once; a cycle made meanwhile (an exception's traceback) is
    collected after. Why it matters: every consume() batch allocates thousands of tracked messages, so
    the collector ran every few hundred records and, as batches aged into the old generation, walked the
    whole heap, which in a Spark worker (pyspark, pandas and pyarrow loaded) is large (profile: docs/benchmarks.md).
    """
    global _pausers, _resume_gc
    with _pause_lock:  # copy lanes are threads: the last one out restores what the first one found
        if _pausers == 0:
            _resume_gc = gc.isenabled()
            gc.disable()
        _pausers += 1
    try:
        yield
    finally:
        with _pause_lock:
            _pausers -= 1
            if _pausers == 0 and _resume_gc:
                gc.enable()
