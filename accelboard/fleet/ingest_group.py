"""Group commit of agents' telemetry batches in one web process.

A gunicorn worker serves several requests at once (``GUNICORN_THREADS``). Batches that arrive while
another batch's transaction is in flight are stored together, in one transaction
(``ingest_services.telemetry_batches_ingest(prepared=...)``: one claim statement, one lock
statement, one stored-instants check, one COPY, one final statement, one commit, one rollup
request), and each request is answered only after that transaction commits, with its own result.

1. Each request validates its own batch first (``telemetry_batch_prepare``, in its own thread):
   a bad batch gets its 4xx and never joins a group.
2. It queues the batch. If fewer than ``GROUP_LEADERS`` threads lead, it leads; otherwise it
   waits (it never touches the database: followers hold no connection's work). Two leaders let
   the next group form and write while the last one commits (with one, a process had one
   transaction in flight and posted back to back stored 12-20 % fewer batches a second).
3. A leader first lingers: it waits until ``TELEMETRY_GROUP_LINGER_MS`` after its batch arrived
   (or until a group's worth is queued) for the batches that arrive meanwhile, which queue behind
   it instead of leading (as a Kafka producer's ``linger.ms``: where the node keeps up, batches
   rarely meet in a process without it); only when batches met in the process within the last
   second (``LINGER_WINDOW_S``), so that a batch alone is not kept waiting for nobody. Then it takes a group of its own batch and what is queued
   behind it: its batch's team, one batch per host (two batches of one host would register it twice in
   one transaction; the later waits for the next group), at most ``GROUP_BATCHES`` batches and
   ``GROUP_SAMPLES`` samples. It stores the group in its own thread's connection and hands each
   member its result, or its error:
   - an ``IngestRejected`` naming a member (``index``: the batch id reused with another body, a
     GPU of another team, an unknown accelerator) answers that member, and the rest are stored
     again without it (the transaction rolled back whole);
   - an ``IngestRejected`` naming none: each member is stored on its own;
   - any other exception (a lost connection, a failed commit): every member of the group gets it
     (a 500: agents retry under the same batch id, which stores nothing twice).
4. Once its group is answered, the leader hands the lead to the first queued thread that does not
   lead (if any) rather than serving forever.

Inside a caller's transaction (a test's, a caller's atomic block) there is no grouping: the batch
is stored in that transaction, as before. ``TELEMETRY_GROUP_COMMIT=0`` turns grouping off.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import connection

from .ingest_services import PreparedBatch, telemetry_batch_prepare, telemetry_batches_ingest
from .ingest_validation import IngestRejected

logger = logging.getLogger(__name__)

# A group's bounds: a remote-write request stores hundreds of hosts in one pass, but a group's
# members all wait for its commit, so it stays the size of what the threads of a process hold.
GROUP_BATCHES = 32
GROUP_SAMPLES = 10_000
# Groups of a process in flight at once (each its own thread's connection and transaction).
GROUP_LEADERS = 2
# A batch lingers only when batches met in its process (one arrived while another was in
# flight) within this many seconds before it.
LINGER_WINDOW_S = 1.0
# The groups' mean size is logged (INFO) every this many groups of a process.
STATS_EVERY = 1_000


class GroupFailed(Exception):
    """The group's transaction failed for all its members (``__cause__``: the leader's error)."""


@dataclass(eq=False)
class _Member:
    team_id: int
    prepared: PreparedBatch
    done: threading.Event = field(default_factory=threading.Event)
    arrived: float = field(default_factory=time.monotonic)
    linger: float = 0.0  # how long it may wait for company if it leads (``IngestGroups._linger_for``)
    lead: bool = False  # leads (or was handed the lead while waiting): never taken into another group
    answered: bool = False
    result: dict[str, Any] | None = None
    error: BaseException | None = None


class _Stats:
    """Groups and batches stored by this process: the mean group size (logged)."""

    def __init__(self) -> None:
        self.groups = 0
        self.batches = 0


class IngestGroups:
    """The queue of one process's waiting batches and its leader (see the module's docstring)."""

    def __init__(
        self,
        *,
        batches: int = GROUP_BATCHES,
        samples: int = GROUP_SAMPLES,
        leaders: int = GROUP_LEADERS,
        linger_s: float | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._arrivals = threading.Condition(self._lock)
        self._linger_s = linger_s  # None: settings.TELEMETRY_GROUP_LINGER_MS, read at each lead
        self._lingering = 0  # leaders waiting for company now
        self._met_at = float("-inf")  # when a batch last arrived while another was in flight
        self._queue: deque[_Member] = deque()
        self._leaders = 0  # threads leading now
        self._max_leaders = leaders
        self._batches = batches
        self._samples = samples
        self.stats = _Stats()

    def ingest(self, *, team_id: int, prepared: PreparedBatch) -> dict[str, Any]:
        """Store ``prepared`` with whatever batches of this process are queued with it; return its
        result once their transaction has committed."""
        member = _Member(team_id=team_id, prepared=prepared)
        with self._lock:
            member.linger = self._linger_for(member.arrived)
            self._queue.append(member)
            # While a leader lingers, a new batch joins its group rather than leading its own.
            leads = self._leaders < self._max_leaders and not self._lingering
            if leads:
                self._leaders += 1
                member.lead = True
            elif self._lingering and len(self._queue) >= self._batches:
                self._arrivals.notify_all()  # a lingering leader's group is full
        if not leads:
            member.done.wait()
            if not member.answered:  # handed the lead
                assert member.lead
        if not member.answered:
            self._lead(member)
        if member.error is not None:
            raise member.error
        assert member.result is not None
        return member.result

    def _linger_for(self, now: float) -> float:
        """How long a batch arriving ``now`` may wait for company (under ``_lock``): the linger
        when batches met in this process (one arrived while another was in flight) less than
        ``LINGER_WINDOW_S`` ago, else none: a batch alone (a small fleet, a quiet hour, posts one
        after another) is written at once."""
        if self._queue or self._leaders:
            self._met_at = now
        if now - self._met_at >= LINGER_WINDOW_S:
            return 0.0
        return self._linger_s if self._linger_s is not None else settings.TELEMETRY_GROUP_LINGER_MS / 1000

    def _lead(self, member: _Member) -> None:
        with self._lock:
            # Linger: wait for company until ``member.linger`` after this batch arrived (a batch
            # handed the lead has waited already), or until the queue would fill a group.
            if member.linger > 0:
                self._lingering += 1
                try:
                    deadline = member.arrived + member.linger
                    while len(self._queue) < self._batches:
                        left = deadline - time.monotonic()
                        if left <= 0:
                            break
                        self._arrivals.wait(left)
                finally:
                    self._lingering -= 1
            group = self._take(member)
        try:
            self._store(group, leader=member)
        finally:
            for other in group:
                if not other.answered:  # interrupted (a worker's timeout) before answering them
                    _answer(other, error=GroupFailed("the telemetry group was interrupted"))
            with self._lock:
                successor = next((queued for queued in self._queue if not queued.lead), None)
                if successor is not None:  # the lead passes on: as many leaders as before
                    successor.lead = True
                    successor.done.set()
                else:
                    self._leaders -= 1
            for other in group:
                if other is not member:
                    other.done.set()

    def _take(self, leader: _Member) -> list[_Member]:
        """``leader``'s group: its batch and the queued batches behind it that fit (under ``_lock``;
        none that another thread leads)."""
        group: list[_Member] = [leader]
        hosts: set[str] = {leader.prepared.batch.hostname}
        samples = len(leader.prepared.batch.gpus)
        for queued in self._queue:
            if len(group) >= self._batches:
                break
            hostname = queued.prepared.batch.hostname
            size = len(queued.prepared.batch.gpus)
            if queued.lead or queued.team_id != leader.team_id or hostname in hosts:
                continue
            if samples + size > self._samples:
                continue
            group.append(queued)
            hosts.add(hostname)
            samples += size
        for taken in group:
            self._queue.remove(taken)
        return group

    def _store(self, group: list[_Member], *, leader: _Member) -> None:
        """Store the group's batches in one transaction (fewer if some are refused); answer each."""
        self.stats.groups += 1
        self.stats.batches += len(group)
        if self.stats.groups % STATS_EVERY == 0:
            logger.info(
                "telemetry group commit: %d groups of %d batches in this process (mean %.2f)",
                self.stats.groups,
                self.stats.batches,
                self.stats.batches / self.stats.groups,
            )
        pending = list(group)
        while pending:
            try:
                results = telemetry_batches_ingest(
                    team_id=pending[0].team_id, prepared=[m.prepared for m in pending]
                )
            except IngestRejected as exc:
                if exc.index is None or not 0 <= exc.index < len(pending):
                    if len(pending) == 1:
                        _answer(pending[0], error=exc)
                        return
                    for alone in pending:  # whose it is, storing each on its own tells
                        self._store_alone(alone)
                    return
                _answer(pending.pop(exc.index), error=exc)
                exc.index = 0  # as its request alone would have it
                continue
            except Exception as exc:
                logger.warning("telemetry group of %d batches failed: %r", len(pending), exc)
                for failed in pending:
                    _answer(failed, error=exc if failed is leader else _failed(exc))
                return
            for answered, result in zip(pending, results, strict=True):
                _answer(answered, result=result)
            return

    def _store_alone(self, member: _Member) -> None:
        try:
            [result] = telemetry_batches_ingest(team_id=member.team_id, prepared=[member.prepared])
        except IngestRejected as exc:
            exc.index = 0
            _answer(member, error=exc)
        except Exception as exc:
            _answer(member, error=exc)
        else:
            _answer(member, result=result)


def _failed(exc: Exception) -> Exception:
    failed = GroupFailed(f"the telemetry group's transaction failed: {exc!r}")
    failed.__cause__ = exc
    return failed


def _answer(
    member: _Member, *, result: dict[str, Any] | None = None, error: BaseException | None = None
) -> None:
    member.result = result
    member.error = error
    member.answered = True


groups = IngestGroups()


def telemetry_batch_ingest_grouped(*, team_id: int, payload: object) -> dict[str, Any]:
    """``ingest_services.telemetry_batch_ingest`` of an agent's batch, stored with the batches
    other threads of this process are storing at the same time (the module's docstring): the
    same result, the same errors, answered once its transaction has committed."""
    prepared = telemetry_batch_prepare(payload=payload)
    if not settings.TELEMETRY_GROUP_COMMIT or connection.in_atomic_block:
        [result] = telemetry_batches_ingest(team_id=team_id, prepared=[prepared])
        return result
    return groups.ingest(team_id=team_id, prepared=prepared)
