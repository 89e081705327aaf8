"""Hand a Spark Structured Streaming checkpoint over to the destination: read its latest committed batch, decide
every Kafka partition through the promotion's offset map (``core.offsets.spark_checkpoint``), write one new committed
batch that the query resumes from on the destination.

Why a new batch and not an edit: Spark's offset log is a write-ahead log; the old entries stay as Spark wrote them
(a person can see where the query was on the source), and the new one is what Spark reads on restart: its latest
batch has a commit, so the next batch starts at its offsets.

The order of writes, so a killed rewrite is finished (never redone differently) by the next one: the hand-over
record ``kafka-ferry-handover-<migration>.json`` in the checkpoint's root, status ``writing`` with the new batch's
bytes' digest; ``offsets/<N+1>``; ``commits/<N+1>`` (batch N's commit, byte for byte: same watermark); the record
again, status ``done``. A done record makes every later rewrite a no-op: the checkpoint's positions are the
destination's from then on, and mapping them again would move the query. Each batch file is created only where
none is (a local file by a hard link, which fails if Spark wrote one meanwhile).

Refused, unchanged: a query that is running (a batch without commit, or a new batch appearing while this runs), a
stateful query (its state store has no version for a batch that never ran), a partition the map cannot translate
exactly. Where the checkpoint is: a local path, or a URL served through the work dir's connection
(``storage.workdir``: ``KFERRY_WORK_DIR_CONN_ID`` / ``[kafka_ferry] work_dir_conn_id``); never credentials in it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kafka_ferry.core.offsets.spark_checkpoint import (
    COMMITS_DIR,
    COMPACT_SUFFIX,
    EMPTY_SINK_ENTRY,
    HANDOVER_SCHEMA_VERSION,
    OFFSETS_DIR,
    SINK_METADATA_DIR,
    CheckpointFormatError,
    HandOverRefused,
    LogState,
    MappedPartition,
    RewritePlan,
    compact_interval,
    is_compaction,
    log_state,
    parse_commit,
    parse_offset_map,
    parse_offsets,
    plan_rewrite,
    sink_batch,
    sink_compaction,
    sink_entries,
)
from kafka_ferry.storage.workdir import StoragePath, is_local, object_path, setting

log = logging.getLogger(__name__)

STATE_DIR = "state"
WRITING, DONE = "writing", "done"


def marker_name(migration: str) -> str:
    return f"kafka-ferry-handover-{migration}.json"


def checkpoint_path(text: str) -> StoragePath:
    """A checkpoint location as given (CLI argument, spec entry): a local path, or a URL through the work dir's
    connection; a URL with a user part is refused by ``object_path`` without echoing it."""
    scheme, sep, rest = text.partition("://")
    if sep and scheme.lower() == "file":
        return Path("/" + rest.lstrip("/"))
    if sep:
        _, conn_id = setting()
        return object_path(text.rstrip("/"), conn_id, origin="the Spark checkpoint location")
    return Path(text)


def load_offset_map(path: StoragePath) -> dict[tuple[str, int], MappedPartition]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise HandOverRefused(f"{path}: no offset map: it is written by the promotion's final translation "
                              "(promote the migration first)") from None
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise CheckpointFormatError(f"{path}: not JSON ({exc})") from None
    return parse_offset_map(document, str(path))


@dataclass
class HandOver:
    """What a rewrite (or its plan) found and did."""

    checkpoint: str
    migration: str
    status: str  # "planned", "written", "already-done"
    plan: RewritePlan | None = None
    batch: int | None = None
    resume_with: dict = field(default_factory=dict)

    def lines(self) -> list[str]:
        out = [f"checkpoint {self.checkpoint} (migration {self.migration}): {self.status}"
               + (f", new batch {self.batch}" if self.batch is not None else "")]
        if self.plan is not None:
            out.append(f"  from committed batch {self.plan.batch}:")
            for s in self.plan.sources:
                if s.new_line is None and not s.decisions:
                    out.append(f"  source {s.index}: kept ({s.kept_because})")
                    continue
                out.append(f"  source {s.index}: " + ("rewritten" if s.new_line is not None else "refused"))
                out += [f"    {d.describe()}" for d in s.decisions]
        if self.resume_with:
            out.append(f"  restart the query with: {json.dumps(self.resume_with, sort_keys=True)}")
        return out

    def as_dict(self) -> dict:
        return {"checkpoint": self.checkpoint, "migration": self.migration, "status": self.status,
                "batch": self.batch, "plan": self.plan.as_dict() if self.plan else None,
                "resume_with": self.resume_with}


class Checkpoint:
    """The files of one checkpoint directory this rewrite reads and writes."""

    def __init__(self, root: StoragePath) -> None:
        self.root = root

    def names(self, folder: str) -> list[str]:
        path = self.root / folder
        if not path.exists():
            return []
        if not is_local(path):
            path.fs.invalidate_cache()
        return [p.name for p in path.iterdir()]

    def state(self) -> LogState:
        return log_state(self.names(OFFSETS_DIR), self.names(COMMITS_DIR))

    def read(self, folder: str, batch: int) -> bytes:
        return (self.root / folder / str(batch)).read_bytes()

    def exists(self, folder: str, batch: int) -> bool:
        return (self.root / folder / str(batch)).exists()

    def create(self, folder: str, batch: int, data: bytes) -> None:
        """Write a batch file that must not exist yet (Spark's writer does the same: it never overwrites)."""
        target = self.root / folder / str(batch)
        if is_local(target):
            tmp = target.with_name(f".{batch}.kafka-ferry.tmp")
            tmp.write_bytes(data)
            try:
                os.link(tmp, target)  # fails if the file appeared meanwhile
            except FileExistsError:
                raise HandOverRefused(f"{target} appeared while the rewrite ran: the query is running; stop it "
                                      "and run this again") from None
            finally:
                tmp.unlink()
            return
        if target.exists():
            raise HandOverRefused(f"{target} appeared while the rewrite ran: the query is running; stop it and run "
                                  "this again")
        target.write_bytes(data)

    def read_marker(self, migration: str) -> dict | None:
        path = self.root / marker_name(migration)
        if not path.exists():
            return None
        try:
            return json.loads(path.read_text())
        except ValueError as exc:
            raise CheckpointFormatError(f"{path}: not JSON ({exc}); it is kafka-ferry's hand-over record: restore "
                                        "it from the checkpoint's backup, or remove it only if the checkpoint was "
                                        "never rewritten") from None

    def write_marker(self, migration: str, record: dict) -> None:
        path = self.root / marker_name(migration)
        text = json.dumps(record, indent=1, sort_keys=True)
        if is_local(path):
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(text)
            tmp.replace(path)
        else:
            path.write_text(text)

    def stateful(self) -> bool:
        return bool(self.names(STATE_DIR))


class FileSinkLog:
    """A file sink's metadata log (``<sink>/_spark_metadata``): the entry of the batch the hand-over adds."""

    def __init__(self, sink: StoragePath) -> None:
        self.sink = sink
        self.log = sink / SINK_METADATA_DIR

    def batches(self) -> dict[int, str]:
        if not self.log.exists():
            raise HandOverRefused(f"{self.sink}: no {SINK_METADATA_DIR}/ folder: not the file sink of a streaming "
                                  "query (is file_sink the query's output path?)")
        if not is_local(self.log):
            self.log.fs.invalidate_cache()
        out = {}
        for p in self.log.iterdir():
            found = sink_batch(p.name)
            if found:
                out[found[0]] = p.name
        return out

    def check(self, batch: int) -> None:
        """The sink's latest batch must be the checkpoint's committed one (the sink logs every batch it ran)."""
        latest = max(self.batches(), default=None)
        if latest != batch:
            raise HandOverRefused(f"{self.sink}: the file sink's latest batch is {latest}, the checkpoint's committed "
                                  f"batch {batch}: not this query's sink, or the query is running")

    def entry(self, batch: int) -> tuple[str, bytes]:
        """(file name, bytes) of the entry of ``batch``: empty, or the compaction it is due (Spark's interval)."""
        names = self.batches()
        compactions = [b for b, n in names.items() if n.endswith(COMPACT_SUFFIX)]
        interval = compact_interval(compactions)
        if not is_compaction(batch, interval):
            return str(batch), EMPTY_SINK_ENTRY
        entries: list[str] = []
        for b in range(max(0, batch - interval), batch):
            if b not in names:
                raise HandOverRefused(f"{self.log}: batch {b} is missing: the sink's log cannot be compacted")
            entries += sink_entries((self.log / names[b]).read_bytes(), f"{self.log}/{names[b]}")
        return f"{batch}{COMPACT_SUFFIX}", sink_compaction(entries)

    def add(self, batch: int) -> None:
        if batch in self.batches():
            return
        name, data = self.entry(batch)
        target = self.log / name
        if is_local(target):
            tmp = target.with_name(f".{name}.kafka-ferry.tmp")
            tmp.write_bytes(data)
            tmp.replace(target)
        else:
            target.write_bytes(data)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _resume_with(plan: RewritePlan, query_bootstrap: str | None) -> dict:
    topics = sorted({d.destination_topic for d in plan.decisions if d.destination_topic})
    out: dict = {"subscribe": ",".join(topics)}
    if query_bootstrap:
        out["kafka.bootstrap.servers"] = query_bootstrap
    return out


def rewrite_checkpoint(root: StoragePath, migration: str, mapped: Mapping[tuple[str, int], MappedPartition],
                       dry_run: bool = False, query_bootstrap: str | None = None,
                       file_sink: StoragePath | None = None) -> HandOver:
    """Hand one checkpoint over (or, ``dry_run``, say how it would be, writing nothing). Raises ``HandOverRefused``
    or ``CheckpointFormatError`` with the checkpoint unchanged. ``file_sink``: the query's file sink directory,
    whose metadata log gets the new batch's entry."""
    where = str(root)
    ckpt = Checkpoint(root)
    sink = FileSinkLog(file_sink) if file_sink is not None else None
    if not (root / OFFSETS_DIR).exists():
        raise HandOverRefused(f"{where}: no {OFFSETS_DIR}/ folder: not a Structured Streaming checkpoint")
    record = ckpt.read_marker(migration)
    if record and record.get("status") == DONE:
        log.info("checkpoint %s: handed over by %s already (batch %s): nothing to do", where, migration,
                 record.get("batch"))
        return HandOver(where, migration, "already-done", batch=record.get("batch"),
                        resume_with=record.get("resume_with") or {})
    if record and record.get("status") == WRITING and ckpt.exists(OFFSETS_DIR, int(record["batch"])):
        if dry_run:
            return HandOver(where, migration, "interrupted: a rewrite finishes it", batch=int(record["batch"]),
                            resume_with=record.get("resume_with") or {})
        return _finish(ckpt, migration, record, sink)
    if ckpt.stateful():
        raise HandOverRefused(f"{where}: a stateful query (its {STATE_DIR}/ folder holds state): the state store has "
                              "no version for a batch that never ran, so a new batch cannot be added; hand it over "
                              "by restarting it on the destination from its own reprocessing plan")
    before = ckpt.state()
    batch = before.committed_batch()
    offsets = parse_offsets(ckpt.read(OFFSETS_DIR, batch), f"{where}/{OFFSETS_DIR}/{batch}")
    commit_bytes = ckpt.read(COMMITS_DIR, batch)
    parse_commit(commit_bytes, f"{where}/{COMMITS_DIR}/{batch}")
    if sink is not None:
        sink.check(batch)
    plan = plan_rewrite(batch, offsets, mapped)
    if plan.refused:
        raise HandOverRefused(f"{where}: batch {batch} cannot be translated exactly, nothing was changed: "
                              + "; ".join(plan.refused))
    if not plan.rewrites_anything:
        raise HandOverRefused(f"{where}: batch {batch} reads no topic of migration {migration}: nothing to hand "
                              "over (is it the right checkpoint, or the right spec?)")
    resume = _resume_with(plan, query_bootstrap)
    if dry_run:
        return HandOver(where, migration, "planned", plan, batch + 1, resume)
    if ckpt.state() != before:
        raise HandOverRefused(f"{where}: a new batch appeared while the rewrite was planned: the query is running; "
                              "stop it and run this again (nothing was changed)")
    new_bytes = plan.new_offsets(offsets).encode()
    record = {"schema_version": HANDOVER_SCHEMA_VERSION, "migration": migration, "status": WRITING,
              "from_batch": batch, "batch": batch + 1, "offsets_sha256": _digest(new_bytes),
              "commit_sha256": _digest(commit_bytes), "resume_with": resume,
              "file_sink": str(file_sink) if file_sink is not None else None, "plan": plan.as_dict(),
              "started_at_ms": int(time.time() * 1000)}
    ckpt.write_marker(migration, record)
    ckpt.create(OFFSETS_DIR, batch + 1, new_bytes)
    ckpt.create(COMMITS_DIR, batch + 1, commit_bytes)
    if sink is not None:
        sink.add(batch + 1)
    ckpt.write_marker(migration, {**record, "status": DONE, "finished_at_ms": int(time.time() * 1000)})
    for d in plan.decisions:
        log.info("checkpoint %s: %s", where, d.describe())
    return HandOver(where, migration, "written", plan, batch + 1, resume)


def _finish(ckpt: Checkpoint, migration: str, record: dict, sink: FileSinkLog | None) -> HandOver:
    """A rewrite that stopped after writing its batch's offsets: finish exactly what it started, or refuse.
    (One stopped before that is simply run again: nothing of it is in the logs.)"""
    where, batch, source = str(ckpt.root), int(record["batch"]), int(record["from_batch"])
    if ckpt.state().latest_offsets != batch:
        raise HandOverRefused(f"{where}: batches after {batch} appeared after an interrupted rewrite: the query ran "
                              f"meanwhile; {marker_name(migration)} says status 'writing': look at the checkpoint "
                              "before anything else (nothing was changed)")
    if _digest(ckpt.read(OFFSETS_DIR, batch)) != record.get("offsets_sha256"):
        raise HandOverRefused(f"{where}/{OFFSETS_DIR}/{batch} is not the batch the interrupted rewrite wrote: the "
                              f"query ran meanwhile; {marker_name(migration)} says status 'writing': look at the "
                              "checkpoint before anything else (nothing was changed)")
    if not ckpt.exists(COMMITS_DIR, batch):
        ckpt.create(COMMITS_DIR, batch, ckpt.read(COMMITS_DIR, source))
    if sink is not None:
        sink.add(batch)
    done = {**record, "status": DONE, "finished_at_ms": int(time.time() * 1000)}
    ckpt.write_marker(migration, done)
    return HandOver(where, migration, "written", batch=batch, resume_with=record.get("resume_with") or {})


def offset_map_file(work_dir: StoragePath) -> StoragePath:
    """Where the promotion's final translation wrote the offset map (``PromotionRunner``: ``<work dir>/offset-map``)."""
    return work_dir / "offset-map" / "offset-map.json"


def hand_over(work_dir: StoragePath, migration: str, locations: list[tuple[str, str | None]], dry_run: bool = False,
              query_bootstrap: str | None = None) -> list[HandOver]:
    """Every (checkpoint, file sink or None) in ``locations`` through the migration's offset map; each is refused or
    written on its own (a refused one is named in the HandOverRefused raised after the others ran, so one bad
    checkpoint does not keep the others on the source)."""
    mapped = load_offset_map(offset_map_file(work_dir))
    done, refused = [], []
    for text, sink in locations:
        try:
            done.append(rewrite_checkpoint(checkpoint_path(text), migration, mapped, dry_run, query_bootstrap,
                                           checkpoint_path(sink) if sink else None))
        except (HandOverRefused, CheckpointFormatError) as exc:
            log.error("checkpoint %s refused: %s", text, exc)
            refused.append(str(exc))
    if refused:
        raise HandOverRefused(f"{len(refused)} of {len(locations)} checkpoint(s) refused: " + " | ".join(refused))
    return done
