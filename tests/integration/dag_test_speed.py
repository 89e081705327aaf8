"""Two waits of Airflow's ``dag.test`` that test nothing, cut in the child processes that run a migration's DAG the way
a user does (prepend ``QUICK_POLL`` / ``PARSE_ONCE`` to the script a test runs with ``python -c``).

Neither changes what runs: every task still runs through ``dag.test``'s own loop, in its order, with its states, tries
and trigger rules; only the time between two turns of that loop and a second parse of unchanged files go.
"""

from __future__ import annotations

import textwrap

# dag.test's loop sleeps 1 s whenever no task is runnable in a turn: after a failed task, each turn marks one more
# level of its downstream tasks upstream_failed, so a run refused in its pre-flight (~10 levels below it) sleeps ~10 s
# before it ends. Only sleeps called from dag.test itself are shortened (to 0.05 s: still a poll, for a deferred
# task's trigger or a human-in-the-loop answer); a task's own waits (sensors, retries, quiesce windows) are untouched.
QUICK_POLL = textwrap.dedent("""
    def _kferry_quick_poll():
        import sys, time
        import airflow.sdk.definitions.dag as dag_module
        sleep, here = time.sleep, dag_module.__file__
        def quick(seconds):
            caller = sys._getframe(1).f_code
            if caller.co_name == "test" and caller.co_filename == here:
                seconds = min(seconds, 0.05)
            sleep(seconds)
        time.sleep = quick
    _kferry_quick_poll()
""")

# dag.test re-parses the whole DAGs folder and writes every DAG of it to the metadata DB before every run (its re-sync
# of the owning bundle, apache/airflow#64884): ~1 s per migration DAG (parse, serialize, compare). A process that runs
# several runs over files that do not change between them (the route matrix's sessions) parses and writes them for its
# first run only: the later re-syncs would write the same DAGs (same hash: a no-op).
PARSE_ONCE = textwrap.dedent("""
    def _kferry_parse_once():
        import sys
        import airflow.dag_processing.dagbag as dagbag_module
        import airflow.sdk.definitions.dag as dag_module
        parse, bags, here = dagbag_module.BundleDagBag, {}, dag_module.__file__
        def bundle_bag(*args, **kwargs):
            caller = sys._getframe(1).f_code
            if caller.co_name != "test" or caller.co_filename != here:
                return parse(*args, **kwargs)  # only dag.test's re-sync is served from the first parse
            key = repr((args, sorted(kwargs.items())))
            if key not in bags:
                bags[key] = parse(*args, **kwargs)
            return bags[key]
        sync, synced = dagbag_module.sync_bag_to_db, set()
        def sync_once(bag, *args, **kwargs):
            caller = sys._getframe(1).f_code
            if caller.co_name == "test" and caller.co_filename == here:
                if id(bag) in synced:
                    return None  # this very bag, parsed once, was written by an earlier run of this process
                synced.add(id(bag))
            return sync(bag, *args, **kwargs)
        dagbag_module.BundleDagBag = bundle_bag
        dagbag_module.sync_bag_to_db = sync_once
    _kferry_parse_once()
""")
