"""`kafka-ferry checkpoint plan|rewrite <spec> <checkpoint dir>`: hand a stopped Spark Structured Streaming query
over to the destination (``translation.spark_checkpoint``).

Why a command beside the promotion's task: a query not listed in the spec (or one stopped after the promotion ran)
is handed over the same way, by whoever runs it, once the migration is promoted. ``plan`` is the dry run: it reads
the checkpoint and the offset map and prints every partition's decision, writing nothing anywhere.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

# host:port[,host:port...]: a bootstrap list and nothing else (no user part, no options): it is printed and recorded
_BOOTSTRAP = re.compile(r"[A-Za-z0-9._\-\[\]:]+:[0-9]{1,5}(,[A-Za-z0-9._\-\[\]:]+:[0-9]{1,5})*")
ACTIONS = {
    "plan": "show how a stopped Spark query's checkpoint would be handed over to the destination (changes nothing)",
    "rewrite": "hand a stopped Spark query's checkpoint over: a new committed batch at the destination's offsets",
}


def add_parser(commands: argparse._SubParsersAction) -> None:
    """The ``checkpoint`` command group, under the top-level parser's commands."""
    text = "Spark Structured Streaming checkpoints: plan or rewrite their hand-over to the destination"
    group = commands.add_parser("checkpoint", help=text, description=text)
    actions = group.add_subparsers(dest="checkpoint_action", required=True, metavar="ACTION")
    for name, help_text in ACTIONS.items():
        action = actions.add_parser(name, help=help_text, description=help_text)
        action.add_argument("spec", help="the migration's YAML file, in <dags folder>/migrations/")
        action.add_argument("checkpoint", help="the query's checkpoint directory: a path, or a URL through the work "
                                               "dir's connection")
        action.add_argument("--file-sink", metavar="DIR",
                            help="the query's file sink directory (its _spark_metadata gets the new batch's entry)")
        action.add_argument("--query-bootstrap-to", metavar="BOOTSTRAP",
                            help="the destination bootstrap the query will use (host:port,...), printed in the "
                                 "restart options and recorded with the hand-over")


def run(spec_path: Path, args: argparse.Namespace) -> int:
    from kafka_ferry.cli import UsageError, migrate_db
    from kafka_ferry.cli.commands import cluster, load
    from kafka_ferry.copy.plan import work_dir
    from kafka_ferry.core.offsets.spark_checkpoint import CheckpointFormatError, HandOverRefused
    from kafka_ferry.state.promotion import PROMOTED, promotion_status
    from kafka_ferry.state.store import MigrationStateStore
    from kafka_ferry.translation.spark_checkpoint import hand_over

    bootstrap = args.query_bootstrap_to
    if bootstrap is not None and not _BOOTSTRAP.fullmatch(bootstrap):
        raise UsageError("--query-bootstrap-to takes host:port[,host:port...] and nothing else (credentials come "
                         "from the query's own Kafka options)")
    spec = load(spec_path)
    dry_run = args.checkpoint_action == "plan"
    migrate_db()
    destination = cluster(spec.destination.connection_id)
    promoted = spec.state_topic_name in destination.list_topic_names() and \
        (promotion_status(MigrationStateStore(destination, spec.state_topic_name)) or {}).get("status") == PROMOTED
    if not promoted:
        message = (f"migration {spec.name} is not promoted: its offset map is final only once the promotion's "
                   "final copy and translation ran (kafka-ferry promote)")
        if not dry_run:
            print(f"refused, nothing was changed: {message}")
            return 1
        print(f"note: {message}; this plan uses the latest translation's map")
    try:
        results = hand_over(work_dir(spec.name), spec.name, [(args.checkpoint, args.file_sink)], dry_run=dry_run,
                            query_bootstrap=bootstrap)
    except (HandOverRefused, CheckpointFormatError) as exc:
        print(f"refused, nothing was changed: {exc}")
        return 1
    for result in results:
        print("\n".join(result.lines()))
    return 0
