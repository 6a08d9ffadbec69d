"""The SQLite spool: cap policy, stable batch ids, restart survival."""

from __future__ import annotations

import json
import os

from accelboard_agent.spool import Spool


def _samples(start: int, count: int) -> list[dict]:
    return [{"time": float(start + n), "gpu": "GPU-a", "power_w": 100.0} for n in range(count)]


def _facts(spool: Spool, **extra) -> None:
    spool.facts_set(host={"hostname": "h", "facts": dict(extra)}, accelerators=[{"uuid": "GPU-a"}])


def test_it_drops_the_oldest_raw_samples_past_the_cap_and_counts_them(tmp_path):
    spool = Spool(str(tmp_path / "s.db"), max_samples=10)
    _facts(spool)

    spool.samples_add(_samples(0, 6))
    dropped = spool.samples_add(_samples(6, 8))
    batch_id = spool.telemetry_seal(hostname="h", max_samples=100)
    payload = json.loads(spool.outbox_due()[0]["payload"])

    assert dropped == 4
    assert spool.status()["dropped_samples"] == 4
    assert [s["time"] for s in payload["samples"]] == [float(n) for n in range(4, 14)]
    # The server learns what was lost, with the host it was lost on.
    assert payload["host"]["facts"]["agent_spool"]["dropped_samples"] == 4
    assert payload["batch_id"] == batch_id


def test_it_keeps_samples_batches_and_ids_across_a_restart(tmp_path):
    path = str(tmp_path / "s.db")
    spool = Spool(path)
    _facts(spool)
    spool.samples_add(_samples(0, 5))
    first = spool.telemetry_seal(hostname="h", max_samples=3)
    spool_id = spool.spool_id
    spool.db.close()  # no orderly shutdown beyond the committed transactions

    again = Spool(path)
    second = again.telemetry_seal(hostname="h", max_samples=3)

    assert again.spool_id == spool_id
    assert [row["client_id"] for row in again.outbox_due()] == [first, second]
    assert first == f"h:{spool_id}:000000001" and second == f"h:{spool_id}:000000002"
    assert again.samples_count() == 0
    assert sum(row["items"] for row in again.outbox_due()) == 5


def test_it_never_reuses_a_batch_id_in_a_new_spool(tmp_path):
    ids = []
    for name in ("a.db", "b.db"):
        spool = Spool(str(tmp_path / name))
        _facts(spool)
        spool.samples_add(_samples(0, 1))
        ids.append(spool.telemetry_seal(hostname="h", max_samples=10))

    assert ids[0] != ids[1]
    assert ids[0].endswith(":000000001") and ids[1].endswith(":000000001")


def test_it_seals_a_facts_only_batch_when_facts_change(tmp_path):
    spool = Spool(str(tmp_path / "s.db"))
    _facts(spool, os="A")

    first = spool.telemetry_seal(hostname="h", max_samples=10)
    nothing = spool.telemetry_seal(hostname="h", max_samples=10)
    _facts(spool, os="B")
    changed = spool.telemetry_seal(hostname="h", max_samples=10)

    assert first is not None and nothing is None and changed is not None
    last = json.loads(spool.outbox_due()[-1]["payload"])
    assert last["samples"] == [] and last["host"]["facts"]["os"] == "B"


def test_it_seals_batch_ids_with_the_reported_hostname_whoever_seals(tmp_path):
    # The daemon reports host "gpu-17" (configured); `flush` without --hostname passes the
    # machine's name. The batch id must name the host the batch reports.
    spool = Spool(str(tmp_path / "s.db"))
    spool.facts_set(host={"hostname": "gpu-17", "facts": {}}, accelerators=[{"uuid": "GPU-a"}])
    spool.samples_add(_samples(0, 2))

    batch_id = spool.telemetry_seal(hostname="build-box.local", max_samples=10)
    payload = json.loads(spool.outbox_due()[0]["payload"])

    assert batch_id == f"gpu-17:{spool.spool_id}:000000001"
    assert payload["host"]["hostname"] == "gpu-17"


def test_the_wal_stays_bounded_while_samples_stream_and_nothing_is_pending(tmp_path):
    # One tick a second of 8 GPUs, sealed and sent every 5 s, for an hour of ticks: the WAL must
    # be checkpointed and cut back as it goes (it used to keep ~4 MB and grow towards it).
    path = str(tmp_path / "s.db")
    spool = Spool(path)
    _facts(spool)
    reader = Spool(path)  # the other threads hold their own connections, as in the daemon
    sizes = []
    for tick in range(3_600):
        spool.samples_add([{"time": float(tick), "gpu": f"GPU-{g}", "power_w": 300.0} for g in range(8)])
        reader.samples_count()
        if tick % 5 == 4:
            spool.telemetry_seal(hostname="h", max_samples=5_000)
            row = spool.outbox_due()[0]
            spool.outbox_done(seq=row["seq"], items=row["items"])
        if tick % 60 == 59:
            sizes.append(os.path.getsize(path + "-wal"))

    assert spool.outbox_pending() == 0
    assert max(sizes) <= 1.5 * 1024 * 1024
    # The idle sender's checkpoint empties it.
    spool.wal_checkpoint()
    assert os.path.getsize(path + "-wal") == 0
