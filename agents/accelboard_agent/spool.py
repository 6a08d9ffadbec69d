"""The on-disk spool: every sample and every upload passes through SQLite (WAL) before the network.

1. The sampler appends raw samples (``samples_add``); the sampler never touches the network.
2. The sender seals the oldest raw samples into a telemetry batch (``telemetry_seal``): in one
   transaction it writes the batch, with its ``batch_id``, to ``outbox`` and deletes the samples.
   A batch's id is fixed from then on, so a resend after a crash or a lost response carries the
   same id and the server (which dedupes by ``batch_id``) stores it once.
3. Runs (``bench``) and inference intervals (``scrape``) go straight to ``outbox`` with their own
   client ids.
4. A row leaves ``outbox`` only when the server accepted it (2xx) or rejected it for good (4xx,
   counted in ``rejected_batches``); otherwise its ``next_try`` moves out by the backoff.
5. Cap policy: at most ``max_samples`` raw samples are kept; past that the oldest raw samples are
   deleted first and counted in ``dropped_samples`` (reported by ``status`` and sent in the host
   facts). Runs and inference intervals are small and never dropped by the cap.

6. Attribution (``intervals``): each observation of who holds each device updates that device's
   open segment (``attribution_open``) and appends the intervals it closed (``attribution``), in
   one transaction. Sealing a batch takes the closed intervals that ended by the batch's last
   sample and cuts there the open segments that have run ``attribution_cut_interval`` (300 s)
   or more, in the same transaction as the samples, so an interval rides in exactly one batch
   under its ``batch_id``. (Cutting every segment at every batch, each 5 s, stored a row per
   holder per 5 s: 17,280 a GPU-day that the allocation job reads back. Cut every 300 s, a
   steady holder is 288 rows a day, and a holder that changes is sent when it changes.) ``flush``
   cuts them all. Intervals are small and never dropped by the cap.

Batch ids are ``<hostname>:<spool id>:<sequence>``; the spool id is random per spool file, so a
deleted and recreated spool never reuses an id the server has already seen.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
import uuid
from pathlib import Path
from typing import Any

from .intervals import MAX_PER_BATCH, Holding, segment_close, segment_cut, segment_observe

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS samples (seq INTEGER PRIMARY KEY AUTOINCREMENT, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS outbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    client_id TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    endpoint TEXT NOT NULL,
    payload TEXT NOT NULL,
    items INTEGER NOT NULL,
    created REAL NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_try REAL NOT NULL DEFAULT 0,
    last_error TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS attribution (seq INTEGER PRIMARY KEY AUTOINCREMENT, end_time REAL NOT NULL, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS attribution_open (gpu TEXT PRIMARY KEY, data TEXT NOT NULL);
"""

# WAL bounds: checkpoint after ~1 MB of writes, truncate the file back to 1 MB afterwards.
WAL_AUTOCHECKPOINT_PAGES = 256
JOURNAL_SIZE_LIMIT = 1024 * 1024

TELEMETRY = "telemetry"
RUN = "run"
INFERENCE = "inference"
# A profiler trace for a run already queued: payload {"run_id", "files"}; sent after its run.
PROFILE = "profile"
ENDPOINTS = {
    TELEMETRY: "/api/v1/telemetry",
    RUN: "/api/v1/runs",
    INFERENCE: "/api/v1/inference-metrics",
    PROFILE: "/api/v1/runs/{run_id}/profile",
}


class Spool:
    """One connection to the spool file; open one per thread."""

    def __init__(self, path: str, *, max_samples: int = 500_000) -> None:
        self.path = path
        self.max_samples = max_samples
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        # Autocommit mode: transactions are explicit (BEGIN IMMEDIATE) where several statements
        # must land together.
        self.db = sqlite3.connect(path, timeout=10.0, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        # NORMAL in WAL mode survives a process crash (SIGKILL); a power cut may lose the last
        # transaction, never corrupt the file.
        self.db.execute("PRAGMA synchronous=NORMAL")
        # The WAL is checkpointed every WAL_AUTOCHECKPOINT_PAGES pages (4 KiB) and cut back to
        # JOURNAL_SIZE_LIMIT after a checkpoint; without the limit it kept its high-water size and,
        # with two connections reading it all the time, grew by every tick's writes (~35 KB/s).
        self.db.execute(f"PRAGMA wal_autocheckpoint={WAL_AUTOCHECKPOINT_PAGES}")
        self.db.execute(f"PRAGMA journal_size_limit={JOURNAL_SIZE_LIMIT}")
        self.db.executescript(_SCHEMA)
        self.db.execute(
            "INSERT OR IGNORE INTO meta (key, value) VALUES ('spool_id', ?)", (uuid.uuid4().hex[:8],)
        )

    def close(self) -> None:
        self.db.close()

    # -- meta ----------------------------------------------------------------------------------
    def _meta(self, key: str, default: str = "") -> str:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else default

    def _meta_set(self, key: str, value: object) -> None:
        self.db.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, str(value)),
        )

    def _meta_add(self, key: str, amount: int) -> None:
        self.db.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + excluded.value",
            (key, amount),
        )

    @property
    def spool_id(self) -> str:
        return self._meta("spool_id")

    # -- samples -------------------------------------------------------------------------------
    def samples_add(self, samples: list[dict[str, Any]]) -> int:
        """Append raw samples, apply the cap; return how many old samples the cap dropped."""
        if not samples:
            return 0
        self.db.execute("BEGIN IMMEDIATE")
        try:
            self.db.executemany(
                "INSERT INTO samples (data) VALUES (?)",
                [(json.dumps(sample, separators=(",", ":")),) for sample in samples],
            )
            # Samples leave only from the oldest end (sealed or dropped), so seq is contiguous
            # and min/max give the count without a scan.
            low, high = self.db.execute("SELECT min(seq), max(seq) FROM samples").fetchone()
            dropped = 0
            if high - low + 1 > self.max_samples:
                cursor = self.db.execute("DELETE FROM samples WHERE seq <= ?", (high - self.max_samples,))
                dropped = cursor.rowcount
                self._meta_add("dropped_samples", dropped)
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        return dropped

    def samples_count(self) -> int:
        return int(self.db.execute("SELECT count(*) FROM samples").fetchone()[0])

    # -- attribution ---------------------------------------------------------------------------
    def _intervals_add(self, intervals: list[dict[str, Any]]) -> None:
        self.db.executemany(
            "INSERT INTO attribution (end_time, data) VALUES (?, ?)",
            [(item["end"], json.dumps(item, separators=(",", ":"))) for item in intervals],
        )

    def _segment_set(self, gpu: str, segment: dict[str, Any] | None) -> None:
        if segment is None:
            self.db.execute("DELETE FROM attribution_open WHERE gpu = ?", (gpu,))
        else:
            self.db.execute(
                "INSERT INTO attribution_open (gpu, data) VALUES (?, ?) "
                "ON CONFLICT(gpu) DO UPDATE SET data = excluded.data",
                (gpu, json.dumps(segment, separators=(",", ":"))),
            )

    def attribution_observe(self, *, at: float, holdings: dict[str, list[Holding]]) -> int:
        """Fold one observation of every device's holders in; return how many intervals closed.
        An open device missing from ``holdings`` is held by nobody now."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            segments = {
                gpu: json.loads(data)
                for gpu, data in self.db.execute("SELECT gpu, data FROM attribution_open")
            }
            closed_count = 0
            for gpu in sorted(set(segments) | set(holdings)):
                closed, segment = segment_observe(
                    segments.get(gpu), gpu=gpu, at=at, holdings=holdings.get(gpu, [])
                )
                self._intervals_add(closed)
                closed_count += len(closed)
                if segment is not None or gpu in segments:
                    self._segment_set(gpu, segment)
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        return closed_count

    def attribution_close_stale(self) -> int:
        """An agent starting: segments left open by its previous life end at their last
        observation (what happened after it is unknown); return how many intervals that made."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            count = 0
            for gpu, data in self.db.execute("SELECT gpu, data FROM attribution_open").fetchall():
                segment = json.loads(data)
                closed = segment_close(segment, float(segment["last"]))
                self._intervals_add(closed)
                count += len(closed)
                self._segment_set(gpu, None)
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        return count

    def _attribution_take(self, until: float, cut_after: float) -> list[dict[str, Any]]:
        """Inside ``telemetry_seal``'s transaction: the intervals ended by ``until`` and the open
        segments that began ``cut_after`` seconds or more before it, cut there (at most
        ``MAX_PER_BATCH``; the rest wait for the next batch)."""
        rows = self.db.execute(
            "SELECT seq, data FROM attribution WHERE end_time <= ? ORDER BY seq LIMIT ?",
            (until, MAX_PER_BATCH),
        ).fetchall()
        taken = [json.loads(data) for _, data in rows]
        if rows:
            self.db.executemany("DELETE FROM attribution WHERE seq = ?", [(seq,) for seq, _ in rows])
        for gpu, data in self.db.execute("SELECT gpu, data FROM attribution_open ORDER BY gpu").fetchall():
            segment = json.loads(data)
            if len(taken) + len(segment["holders"]) > MAX_PER_BATCH:
                break
            if until - float(segment["start"]) < cut_after:
                continue
            cut, rest = segment_cut(segment, until)
            if cut:
                taken.extend(cut)
                self._segment_set(gpu, rest)
        return taken

    # -- host facts ----------------------------------------------------------------------------
    def facts_set(self, *, host: dict[str, Any], accelerators: list[dict[str, Any]]) -> bool:
        """Remember the host facts; return True when they changed (they go in the next batch)."""
        text = json.dumps({"host": host, "accelerators": accelerators}, sort_keys=True)
        if text == self._meta("facts"):
            return False
        self.db.execute("BEGIN IMMEDIATE")
        self._meta_set("facts", text)
        self._meta_add("facts_version", 1)
        self.db.execute("COMMIT")
        return True

    # -- sealing -------------------------------------------------------------------------------
    def telemetry_seal(self, *, hostname: str, max_samples: int, cut_after: float = 0.0) -> str | None:
        """Move the oldest raw samples (up to ``max_samples``) into one outbox batch.

        A batch is sealed also with no samples when the host facts changed since the last one,
        so a host without GPUs still registers. Returns the batch id, or None if nothing to do.
        """
        self.db.execute("BEGIN IMMEDIATE")
        try:
            rows = self.db.execute(
                "SELECT seq, data FROM samples ORDER BY seq LIMIT ?", (max_samples,)
            ).fetchall()
            facts_version = self._meta("facts_version", "0")
            facts_text = self._meta("facts")
            if not facts_text or (not rows and facts_version == self._meta("facts_sent_version", "0")):
                self.db.execute("ROLLBACK")
                return None
            facts = json.loads(facts_text)
            number = int(self._meta("batch_seq", "0")) + 1
            # The id carries the hostname the batch reports (the one the daemon was configured
            # with), whoever seals it: ``flush`` run without ``--hostname`` must not seal under
            # the machine's name.
            reported = str(facts["host"].get("hostname") or hostname)
            batch_id = f"{reported[:80]}:{self.spool_id}:{number:09d}"
            host = dict(facts["host"])
            host_facts = dict(host.get("facts") or {})
            # The server sees what the agent lost, next to the host it lost it on.
            host_facts["agent_spool"] = {
                "dropped_samples": int(self._meta("dropped_samples", "0")),
                "rejected_batches": int(self._meta("rejected_batches", "0")),
            }
            host["facts"] = host_facts
            payload = {
                "batch_id": batch_id,
                "host": host,
                # Each batch carries the registration: a batch may arrive after the one that
                # first registered a GPU was dropped by the cap or rejected.
                "accelerators": facts["accelerators"],
                "samples": [json.loads(data) for _, data in rows],
            }
            if payload["samples"]:
                until = max(float(s["time"]) for s in payload["samples"])
                attribution = self._attribution_take(until, cut_after)
                if attribution:
                    payload["attribution"] = attribution
            self.db.execute(
                "INSERT INTO outbox (client_id, kind, endpoint, payload, items, created) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    batch_id,
                    TELEMETRY,
                    ENDPOINTS[TELEMETRY],
                    json.dumps(payload, separators=(",", ":")),
                    len(rows),
                    time.time(),
                ),
            )
            if rows:
                self.db.execute("DELETE FROM samples WHERE seq <= ?", (rows[-1][0],))
            self._meta_set("batch_seq", number)
            self._meta_set("facts_sent_version", facts_version)
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        return batch_id

    # -- outbox --------------------------------------------------------------------------------
    def outbox_add(self, *, client_id: str, kind: str, payload: dict[str, Any], items: int = 1) -> bool:
        """Queue a run or an inference batch; False if that client id is already queued."""
        cursor = self.db.execute(
            "INSERT OR IGNORE INTO outbox (client_id, kind, endpoint, payload, items, created) VALUES (?, ?, ?, ?, ?, ?)",
            (
                client_id,
                kind,
                ENDPOINTS[kind].format(run_id=payload.get("run_id", "")),
                json.dumps(payload, separators=(",", ":")),
                items,
                time.time(),
            ),
        )
        return cursor.rowcount == 1

    def outbox_pending(self, kind: str | None = None) -> int:
        if kind is None:
            return int(self.db.execute("SELECT count(*) FROM outbox").fetchone()[0])
        return int(self.db.execute("SELECT count(*) FROM outbox WHERE kind = ?", (kind,)).fetchone()[0])

    def outbox_due(self, *, now: float | None = None, limit: int = 50) -> list[dict[str, Any]]:
        now = time.time() if now is None else now
        rows = self.db.execute(
            "SELECT seq, client_id, kind, endpoint, payload, items, attempts FROM outbox "
            "WHERE next_try <= ? ORDER BY seq LIMIT ?",
            (now, limit),
        ).fetchall()
        keys = ("seq", "client_id", "kind", "endpoint", "payload", "items", "attempts")
        return [dict(zip(keys, row)) for row in rows]

    def outbox_get(self, client_id: str) -> dict[str, Any] | None:
        row = self.db.execute(
            "SELECT seq, client_id, kind, endpoint, payload, items, attempts FROM outbox WHERE client_id = ?",
            (client_id,),
        ).fetchone()
        keys = ("seq", "client_id", "kind", "endpoint", "payload", "items", "attempts")
        return dict(zip(keys, row)) if row else None

    def outbox_next_try(self) -> float | None:
        row = self.db.execute("SELECT min(next_try) FROM outbox").fetchone()
        return row[0]

    def outbox_done(self, *, seq: int, items: int) -> None:
        self.db.execute("BEGIN IMMEDIATE")
        self.db.execute("DELETE FROM outbox WHERE seq = ?", (seq,))
        self._meta_set("last_success", time.time())
        # A success after an error: the error is history, ``status`` must not show it as current.
        self._meta_set("last_error", "")
        self._meta_add("sent_batches", 1)
        self._meta_add("sent_items", items)
        self.db.execute("COMMIT")

    def outbox_retry(self, *, seq: int, delay: float, error: str) -> None:
        self.db.execute("BEGIN IMMEDIATE")
        self.db.execute(
            "UPDATE outbox SET attempts = attempts + 1, next_try = ?, last_error = ? WHERE seq = ?",
            (time.time() + delay, error[:500], seq),
        )
        self._meta_set("last_error", error[:500])
        self.db.execute("COMMIT")

    def outbox_reject(self, *, seq: int, items: int, error: str) -> None:
        self.db.execute("BEGIN IMMEDIATE")
        self.db.execute("DELETE FROM outbox WHERE seq = ?", (seq,))
        self._meta_add("rejected_batches", 1)
        self._meta_add("rejected_items", items)
        self._meta_set("last_error", error[:500])
        self.db.execute("COMMIT")

    def outbox_retry_now(self) -> None:
        """Make every queued row due (``flush``)."""
        self.db.execute("UPDATE outbox SET next_try = 0")

    def outbox_backoff_reset(self) -> None:
        """Forget stored backoffs (an agent starting): the server may have come back while the
        agent was down, and a batch kept waiting out an old backoff would arrive after newer
        ones. Attempts restart too, so a server still away is retried from the base delay."""
        self.db.execute("UPDATE outbox SET next_try = 0, attempts = 0 WHERE next_try > 0 OR attempts > 0")

    def wal_checkpoint(self) -> None:
        """Checkpoint the WAL and cut it back to ``JOURNAL_SIZE_LIMIT`` (the sender, when idle)."""
        self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    # -- status --------------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        last = self._meta("last_success")
        size = 0
        for suffix in ("", "-wal"):
            try:
                size += os.path.getsize(self.path + suffix)
            except OSError:
                pass
        by_kind = dict(self.db.execute("SELECT kind, count(*) FROM outbox GROUP BY kind").fetchall())
        return {
            "spool": self.path,
            "spool_bytes": size,
            "raw_samples": self.samples_count(),
            "pending_batches": sum(by_kind.values()),
            "pending_by_kind": by_kind,
            "dropped_samples": int(self._meta("dropped_samples", "0")),
            "rejected_batches": int(self._meta("rejected_batches", "0")),
            "rejected_items": int(self._meta("rejected_items", "0")),
            "sent_batches": int(self._meta("sent_batches", "0")),
            "sent_items": int(self._meta("sent_items", "0")),
            "last_success": float(last) if last else None,
            "last_error": self._meta("last_error") or None,
        }
