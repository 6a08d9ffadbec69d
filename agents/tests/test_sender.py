"""The sender against a stand-in server: retries, backoff, idempotent batch ids, 4xx drops."""

from __future__ import annotations

import random

from accelboard_agent.sender import MAX_SEALED_AHEAD, Sender, backoff_delay
from accelboard_agent.spool import Spool


def _spool(tmp_path, samples: int = 3) -> Spool:
    spool = Spool(str(tmp_path / "s.db"))
    spool.facts_set(host={"hostname": "h", "facts": {}}, accelerators=[{"uuid": "GPU-a"}])
    spool.samples_add([{"time": float(n), "gpu": "GPU-a"} for n in range(samples)])
    return spool


def _sender(spool: Spool, url: str, token: str = "test-token", **kwargs) -> Sender:
    options = {"backoff_base": 0.01, "backoff_max": 0.02, "timeout": 2.0}
    options.update(kwargs)
    return Sender(spool=spool, server=url, token=token, hostname="h", **options)


def test_it_sends_gzip_json_with_the_bearer_token(tmp_path, server):
    spool = _spool(tmp_path)

    counts = _sender(spool, server.url).send_once()

    request = server.requests[0]
    assert counts == {"sent": 1, "rejected": 0, "retry": 0}
    assert request["path"] == "/api/v1/telemetry"
    assert request["headers"]["Authorization"] == "Bearer test-token"
    assert request["headers"]["Content-Encoding"] == "gzip"
    assert [s["time"] for s in server.samples()] == [0.0, 1.0, 2.0]
    assert spool.outbox_pending() == 0 and spool.status()["sent_items"] == 3


def test_it_retries_5xx_with_the_same_batch_id_until_accepted(tmp_path, server):
    spool = _spool(tmp_path)
    sender = _sender(spool, server.url)
    server.forced = [503, 502]

    outcomes = []
    for _ in range(3):
        outcomes.append(sender.send_once())
        spool.outbox_retry_now()

    ids = [r["body"]["batch_id"] for r in server.requests]
    assert [o["retry"] for o in outcomes] == [1, 1, 0]
    assert len(ids) == 3 and len(set(ids)) == 1
    assert len(server.samples()) == 3
    assert spool.outbox_pending() == 0


def test_it_drops_a_batch_the_server_rejects_with_4xx_and_counts_it(tmp_path, server, caplog):
    spool = _spool(tmp_path)
    server.forced = [422]

    counts = _sender(spool, server.url).send_once()

    assert counts["rejected"] == 1
    assert spool.outbox_pending() == 0
    status = spool.status()
    assert status["rejected_batches"] == 1 and status["rejected_items"] == 3
    assert "HTTP 422 forced: forced at samples[0]" in status["last_error"]
    assert "server rejected telemetry" in caplog.text


def test_it_keeps_the_batch_when_the_token_is_refused(tmp_path, server):
    spool = _spool(tmp_path)

    counts = _sender(spool, server.url, token="wrong").send_once()

    assert counts["retry"] == 1
    assert spool.outbox_pending() == 1
    assert spool.status()["rejected_batches"] == 0


def test_it_keeps_the_batch_while_the_server_is_away(tmp_path, server):
    spool = _spool(tmp_path)
    server.stop()
    sender = _sender(spool, server.url)

    counts = sender.send_once()
    row = spool.outbox_due(now=1e12)[0]

    assert counts["retry"] == 1
    assert row["attempts"] == 1
    assert "network error" in spool.status()["last_error"]
    server.start()
    spool.outbox_retry_now()
    assert sender.send_once()["sent"] == 1
    assert len(server.samples()) == 3


def test_it_seals_no_more_than_two_batches_ahead_while_the_server_is_away(tmp_path, server):
    spool = _spool(tmp_path, samples=0)
    server.stop()
    sender = _sender(spool, server.url, batch_max_samples=2)

    for n in range(5):
        spool.samples_add([{"time": float(10 * n + k), "gpu": "GPU-a"} for k in range(2)])
        sender.send_once()

    assert spool.outbox_pending("telemetry") == MAX_SEALED_AHEAD
    assert spool.samples_count() == 10 - 2 * MAX_SEALED_AHEAD  # the rest stays raw, under the cap policy


def test_backoff_grows_exponentially_with_bounded_jitter():
    rng = random.Random(7)
    delays = [backoff_delay(attempt, base=1.0, cap=60.0, rng=rng) for attempt in range(1, 10)]

    nominal = [min(60.0, 2 ** (a - 1)) for a in range(1, 10)]
    assert all(n / 2 <= d <= n for d, n in zip(delays, nominal))
    assert delays[-1] >= 30.0
    assert len({round(d, 6) for d in delays}) == len(delays)  # jitter: no lockstep


def test_it_sends_runs_and_inference_batches_to_their_endpoints(tmp_path, server):
    spool = _spool(tmp_path, samples=0)
    spool.outbox_add(client_id="run-1", kind="run", payload={"run_id": "run-1"})
    spool.outbox_add(
        client_id="h:vllm:1", kind="inference", payload={"batch_id": "h:vllm:1", "intervals": []}
    )

    _sender(spool, server.url).send_once()

    assert sorted(r["path"] for r in server.requests) == [
        "/api/v1/inference-metrics",
        "/api/v1/runs",
        "/api/v1/telemetry",
    ]
    assert server.stored("/api/v1/runs") == [{"run_id": "run-1"}]
    assert spool.outbox_pending() == 0


def test_it_forgets_a_stored_backoff_when_the_agent_restarts(tmp_path, server):
    # The server was away: the batch was told to wait two minutes. The agent restarts after the
    # server is back; the batch must go at once, not after the old backoff.
    spool = _spool(tmp_path)
    server.stop()
    _sender(spool, server.url, backoff_base=120.0, backoff_max=120.0).send_once()
    assert spool.outbox_due() == []
    server.start()

    restarted = _sender(spool, server.url)
    restarted.stop.set()  # run() resets the backoffs, then finds stop set and returns
    restarted.run()
    restarted.stop.clear()

    row = spool.outbox_due()[0]
    assert row["attempts"] == 0
    assert restarted.send_once()["sent"] == 1
    assert len(server.samples()) == 3


def test_status_shows_no_error_once_a_later_send_succeeded(tmp_path, server):
    spool = _spool(tmp_path)
    server.forced = [503]
    sender = _sender(spool, server.url)
    sender.send_once()
    assert "HTTP 503" in spool.status()["last_error"]

    spool.outbox_retry_now()
    assert sender.send_once()["sent"] == 1

    assert spool.status()["last_error"] is None
