"""The kubelet's pod list (``/pods``) against a real loopback HTTP(S) server answering as the
kubelet does, and the holders the agent builds with it: pods known by their cgroup's UID get
their namespace, name, container name and allowlisted labels (NVML mocked, /proc a fake tree)."""

from __future__ import annotations

import logging
import os
from types import SimpleNamespace

import pytest
from conftest import FakeGpu, fake_process  # this folder (no __init__.py)
from kubelet_http import KubeletHttp, certificates, pod

from accelboard_agent.attribution import Attributor, Sources
from accelboard_agent.cli import _attributor
from accelboard_agent.config import config_load
from accelboard_agent.gpus import nvml_open
from accelboard_agent.kubelet_pods import KubeletPods, KubeletPodsError, pod_list_parse

UID_TRAIN = "11111111-1111-1111-1111-111111111111"
UID_VLLM = "22222222-2222-2222-2222-222222222222"
UID_CHAT_A = "33333333-3333-3333-3333-333333333333"
UID_CHAT_B = "44444444-4444-4444-4444-444444444444"
UID_PLUGIN = "55555555-5555-5555-5555-555555555555"
LONG_KEY = "example.com/" + "k" * 52  # 64 characters: a valid Kubernetes key, over the server's 63
PODS = [
    pod("team-b", "train-1", UID_TRAIN,
        labels={"app": "trainer", "kueue.x-k8s.io/queue-name": "gpu-queue", "team": "b"},
        containers={"main": "a" * 64}, init_containers={"fetch-data": "9" * 64}),
    pod("llm", "vllm-0", UID_VLLM,
        labels={"app": "vllm", "app.kubernetes.io/name": "vllm", "app.kubernetes.io/part-of": "llm-serving",
                "example.com/cost-center": "cc-4711", "pod-template-hash": "7f9c6d5b8"},
        containers={"vllm": "b" * 64, "metrics-sidecar": "f" * 64}),
    pod("team-a", "chat-a", UID_CHAT_A,
        labels={"app": "chat", "team": "a", "note": "first line\nsecond line"}, containers={"app": "c" * 64}),
    pod("team-c", "chat-b", UID_CHAT_B,
        labels={"app": "chat", "team": "c", LONG_KEY: "x"}, containers={"app": "d" * 64}),
    pod("kube-system", "nvidia-device-plugin-x7k2p", UID_PLUGIN, containers={"plugin": "0" * 64}),
]  # fmt: skip
ALLOW = ("app", "team", "note", "app.kubernetes.io/*", "example.com/*")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def kubelet():
    server = KubeletHttp(token="sa-token-1")
    server.pods = list(PODS)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def token_file(tmp_path):
    path = tmp_path / "token"
    path.write_text("sa-token-1\n")
    return path


def test_it_reads_names_labels_and_containers_with_the_bearer_token(kubelet, token_file, monkeypatch):
    # A proxy in the environment is not for the node's own kubelet.
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    pods = KubeletPods(kubelet.url, token_file=str(token_file), timeout=2.0)

    vllm = pods.by_uid(UID_VLLM)
    train = pods.by_name("team-b", "train-1")

    assert vllm is not None and (vllm.namespace, vllm.name) == ("llm", "vllm-0")
    assert vllm.labels["app.kubernetes.io/part-of"] == "llm-serving"
    assert vllm.containers == {"b" * 64: "vllm", "f" * 64: "metrics-sidecar"}
    assert train is not None and train.uid == UID_TRAIN
    assert train.containers == {"a" * 64: "main", "9" * 64: "fetch-data"}  # init containers too
    assert pods.by_uid(UID_PLUGIN).labels == {}
    assert kubelet.tokens() == ["Bearer sa-token-1"]  # one request answered all lookups
    assert kubelet.requests[0]["path"] == "/pods"
    assert kubelet.requests[0]["headers"]["Accept"] == "application/json"


def test_it_reads_a_rotated_token_at_the_next_request(kubelet, token_file):
    clock = Clock()
    pods = KubeletPods(kubelet.url, token_file=str(token_file), timeout=2.0, clock=clock)
    assert pods.by_uid(UID_VLLM) is not None

    # The kubelet writes a projected token anew (a new file swapped in) before the old expires.
    rotated = token_file.parent / "token.new"
    rotated.write_text("sa-token-2")
    os.replace(rotated, token_file)
    kubelet.token = "sa-token-2"
    kubelet.pods = [*PODS, pod("team-a", "chat-new", "66666666-6666-6666-6666-666666666666")]
    clock.now += 30

    assert pods.by_name("team-a", "chat-new") is not None
    assert kubelet.tokens() == ["Bearer sa-token-1", "Bearer sa-token-2"]


def test_it_asks_again_when_stale_or_for_a_new_pod_but_never_more_often_than_it_should(kubelet, token_file):
    clock = Clock()
    pods = KubeletPods(
        kubelet.url, token_file=str(token_file), timeout=2.0, clock=clock, max_age=30, min_interval=5
    )

    assert pods.by_uid(UID_VLLM) is not None and pods.requests == 1
    clock.now += 4
    assert pods.by_uid("77777777-0000-0000-0000-000000000000") is None  # unknown, but asked 4 s ago
    assert pods.requests == 1
    clock.now += 1
    kubelet.pods = [*PODS, pod("llm", "vllm-1", "77777777-0000-0000-0000-000000000000")]
    new = pods.by_uid("77777777-0000-0000-0000-000000000000")  # a pod just started: asked at once
    assert new is not None and new.name == "vllm-1" and pods.requests == 2
    clock.now += 5
    assert pods.by_uid("88888888-0000-0000-0000-000000000000") is None  # asked, not there
    assert pods.requests == 3
    clock.now += 10
    assert pods.by_uid("88888888-0000-0000-0000-000000000000") is None  # not asked for it again
    assert pods.by_uid(UID_CHAT_A) is not None
    assert pods.requests == 3
    clock.now += 19  # 29 s since the last request (a new pod's counts too): nothing asked
    assert pods.by_uid(UID_CHAT_A) is not None and pods.requests == 3
    clock.now += 1  # 30 s: the list is read again
    assert pods.by_uid(UID_CHAT_A) is not None and pods.requests == 4
    assert len(kubelet.requests) == 4


def test_a_kubelet_away_is_logged_once_and_the_last_list_stays_in_use(kubelet, token_file, caplog):
    clock = Clock()
    pods = KubeletPods(kubelet.url, token_file=str(token_file), timeout=1.0, clock=clock)
    assert pods.by_uid(UID_CHAT_A) is not None
    kubelet.stop()

    with caplog.at_level(logging.WARNING, logger="accelboard_agent"):
        for _ in range(4):
            clock.now += 30
            # What it read before still answers; a pod it never saw waits for the kubelet.
            assert pods.by_uid(UID_CHAT_A) is not None
            assert pods.by_uid("99999999-0000-0000-0000-000000000000") is None
        kubelet.pods = [*PODS, pod("ml", "late", "99999999-0000-0000-0000-000000000000")]
        kubelet.start()
        clock.now += 30
        assert pods.by_uid("99999999-0000-0000-0000-000000000000") is not None

    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2, messages
    assert messages[0].startswith(f"kubelet pods {kubelet.url}: ") and "refused" in messages[0]
    assert messages[1] == f"kubelet pods {kubelet.url} answers again"
    assert pods.requests == 6  # one try per 30 s while away, none on the unknown pod


def test_it_says_what_the_kubelet_answered(kubelet, tmp_path):
    wrong = tmp_path / "wrong"
    wrong.write_text("not-the-token")
    with pytest.raises(KubeletPodsError, match=r"^HTTP 401: Unauthorized$"):
        KubeletPods(kubelet.url, token_file=str(wrong), timeout=2.0).read()
    with pytest.raises(KubeletPodsError, match=r"^cannot read kubelet_token_file .*/absent: No such file"):
        KubeletPods(kubelet.url, token_file=str(tmp_path / "absent"), timeout=2.0).read()
    kubelet.token = None
    with pytest.raises(KubeletPodsError, match=r"^HTTP 404: 404 page not found$"):
        KubeletPods(kubelet.url.replace("/pods", "/podz"), timeout=2.0).read()
    kubelet.stop()
    with pytest.raises(KubeletPodsError, match="refused"):
        KubeletPods(kubelet.url, timeout=2.0).read()


def test_it_skips_malformed_items_and_refuses_what_is_no_pod_list():
    listed = pod_list_parse(
        b'{"kind": "PodList", "items": [{"metadata": {"name": "a", "namespace": "n", "uid": "u1",'
        b' "labels": {"ok": "1", "bad": 2}}}, {"metadata": {"name": "b"}}, 7, {"metadata": {"name": "c",'
        b' "namespace": "n", "uid": "u3"}, "status": {"containerStatuses": [{"name": "x"}, 5]}}]}'
    )

    assert [(p.uid, dict(p.labels), dict(p.containers)) for p in listed] == [
        ("u1", {"ok": "1"}, {}),
        ("u3", {}, {}),
    ]
    with pytest.raises(KubeletPodsError, match="not JSON"):
        pod_list_parse(b"<html>")
    with pytest.raises(KubeletPodsError, match="not a PodList"):
        pod_list_parse(b'{"kind": "Status", "status": "Failure"}')


def test_labels_outside_the_allowlist_or_that_the_server_would_refuse_are_left_out_with_one_warning(caplog):
    pods = KubeletPods("http://127.0.0.1:9/pods")
    labels = {
        "app": "chat",
        "team": "a",
        "pod-template-hash": "7f9c",
        "note": "first line\nsecond line",
        "app.kubernetes.io/name": "chat",
        "app.kubernetes.io/instance": "v" * 257,
        LONG_KEY: "x",
    }

    with caplog.at_level(logging.WARNING, logger="accelboard_agent"):
        first = pods.labels_allowed(labels, ALLOW)
        again = pods.labels_allowed(labels, ALLOW)
        many = pods.labels_allowed({f"example.com/l{i:03d}": "v" for i in range(70)}, ["example.com/*"])

    assert first == again == {"app": "chat", "team": "a", "app.kubernetes.io/name": "chat"}
    assert pods.labels_allowed(labels, []) == {}
    assert list(many) == [f"example.com/l{i:03d}" for i in range(64)]
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 3 + 6, warnings  # once per key, not once per pod or per observation
    assert "'note' left out: it holds a control character" in warnings[2]
    assert "'app.kubernetes.io/instance' left out: its value is over 256 characters" in warnings[0]
    assert f"{LONG_KEY!r} left out: its key is over 63 characters" in warnings[1]
    assert "'example.com/l064' left out: a pod may carry at most 64 labels" in warnings[3]


@pytest.fixture
def tls(tmp_path):
    made = certificates(tmp_path)
    if made is None:
        if os.environ.get("CI"):
            raise AssertionError("openssl is needed to test the kubelet's TLS")
        pytest.skip("openssl is not installed")
    return made


def test_it_verifies_the_kubelets_certificate_against_the_ca_file(tls, token_file):
    server = KubeletHttp(token="sa-token-1", tls=(tls["cert"], tls["key"]))
    server.pods = list(PODS)
    server.start()
    try:
        verified = KubeletPods(server.url, token_file=str(token_file), ca_file=tls["ca"], timeout=2.0)
        assert verified.read()[1].name == "vllm-0"
        with pytest.raises(KubeletPodsError, match="CERTIFICATE_VERIFY_FAILED"):
            KubeletPods(server.url, token_file=str(token_file), ca_file=tls["other_ca"], timeout=2.0).read()
        with pytest.raises(KubeletPodsError, match="CERTIFICATE_VERIFY_FAILED"):
            KubeletPods(server.url, token_file=str(token_file), timeout=2.0).read()  # the system's CAs
        insecure = KubeletPods(server.url, token_file=str(token_file), insecure=True, timeout=2.0)
        assert len(insecure.read()) == len(PODS)
        assert server.tokens() == ["Bearer sa-token-1"] * 2  # none sent where TLS failed
    finally:
        server.stop()


# -- the holders built with it ----------------------------------------------------------------

_CGROUP = (
    "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice/cri-containerd-{}.scope\n"
)


def _cgroup(uid: str, container: str) -> str:
    return _CGROUP.format(uid.replace("-", "_"), container)


def _host(fake_nvml, tmp_path):
    """GPU 0: vLLM's server and its metrics sidecar (one pod); GPU 1: two chat pods; GPU 2: a pod
    the kubelet does not list."""
    gpus = [FakeGpu(0), FakeGpu(1), FakeGpu(2)]
    fake_nvml(gpus)
    procfs = tmp_path / "proc"
    fake_process(procfs, 601, cgroup=_cgroup(UID_VLLM, "b" * 64))
    fake_process(procfs, 602, cgroup=_cgroup(UID_VLLM, "f" * 64))
    fake_process(procfs, 701, cgroup=_cgroup(UID_CHAT_A, "c" * 64))
    fake_process(procfs, 702, cgroup=_cgroup(UID_CHAT_B, "d" * 64))
    fake_process(procfs, 901, cgroup=_cgroup("90909090-9090-9090-9090-909090909090", "e" * 64))
    gpus[0].processes = [
        SimpleNamespace(pid=601, usedGpuMemory=40 << 30),
        SimpleNamespace(pid=602, usedGpuMemory=1 << 30),
    ]
    gpus[1].processes = [
        SimpleNamespace(pid=701, usedGpuMemory=8 << 30),
        SimpleNamespace(pid=702, usedGpuMemory=4 << 30),
    ]
    gpus[1].process_util = [(701, 60), (702, 20)]
    gpus[2].processes = [SimpleNamespace(pid=901, usedGpuMemory=2 << 30)]
    return nvml_open(), str(procfs)


def test_a_pod_known_by_its_cgroup_gets_its_name_container_and_labels_from_the_pod_list(
    fake_nvml, kubelet, token_file, tmp_path, caplog
):
    backend, procfs = _host(fake_nvml, tmp_path)
    sources = Sources(
        nvml=True,
        cgroups=True,
        procfs=procfs,
        kubelet_pods_url=kubelet.url,
        kubelet_token_file=str(token_file),
        pod_labels=ALLOW,
        timeout=2.0,
    )
    attributor = Attributor(sources)

    with caplog.at_level(logging.WARNING, logger="accelboard_agent"):
        first = attributor.observe(backend, backend.devices)
        second = attributor.observe(backend, backend.devices)
    attributor.close()

    assert first == second
    # vLLM and its sidecar: one pod, one holder on the GPU (no container: theirs differ), their
    # memory added up.
    [vllm] = first["GPU-fake-0000-aaaa"]
    assert vllm.workload == {
        "kind": "pod", "uid": "llm/vllm-0", "namespace": "llm", "name": "vllm-0",
        "labels": {"app": "vllm", "app.kubernetes.io/name": "vllm", "app.kubernetes.io/part-of": "llm-serving",
                   "example.com/cost-center": "cc-4711"},
    }  # fmt: skip
    assert (vllm.share, vllm.basis, vllm.memory_bytes, vllm.key) == (
        1.0,
        "exclusive",
        41 << 30,
        "pod|llm/vllm-0|",
    )
    chat_a, chat_b = first["GPU-fake-0001-aaaa"]
    assert chat_a.workload == {
        "kind": "pod", "uid": "team-a/chat-a", "namespace": "team-a", "name": "chat-a", "container": "app",
        "labels": {"app": "chat", "team": "a"},  # "note" holds a newline: left out
    }  # fmt: skip
    assert (chat_a.share, chat_a.basis, chat_a.sm_util) == (0.75, "measured", 60.0)
    assert chat_b.workload["labels"] == {"app": "chat", "team": "c"}  # the 64-character key left out
    assert (chat_b.share, chat_b.workload["uid"], chat_b.workload["container"]) == (
        0.25,
        "team-c/chat-b",
        "app",
    )
    # A pod the kubelet does not list keeps its cgroup's UID and container id.
    assert [h.workload for h in first["GPU-fake-0002-aaaa"]] == [
        {"kind": "pod", "uid": "90909090-9090-9090-9090-909090909090", "container": "e" * 12}
    ]
    # One list read answers both observations; the pod it does not list is asked for again only
    # 5 s after it was read.
    assert len(kubelet.requests) == 1
    assert sorted(r.getMessage().split(" left out")[0] for r in caplog.records) == [
        f"pod label {LONG_KEY!r}",
        "pod label 'note'",
    ]


def test_without_an_allowlist_no_label_is_sent_and_with_the_pod_list_away_attribution_goes_on(
    fake_nvml, kubelet, token_file, tmp_path, caplog
):
    backend, procfs = _host(fake_nvml, tmp_path)
    kubelet.stop()
    attributor = Attributor(
        Sources(
            nvml=True, cgroups=True, procfs=procfs, kubelet_pods_url=kubelet.url,
            kubelet_token_file=str(token_file), timeout=1.0,
        )
    )  # fmt: skip

    with caplog.at_level(logging.WARNING, logger="accelboard_agent"):
        away = attributor.observe(backend, backend.devices)
        attributor.observe(backend, backend.devices)
        attributor.pod_list.clock = lambda: 10.0**9  # long after: the list is read again
        kubelet.start()
        back = attributor.observe(backend, backend.devices)

    assert [h.workload["uid"] for h in away["GPU-fake-0001-aaaa"]] == [UID_CHAT_A, UID_CHAT_B]
    assert [h.workload for h in back["GPU-fake-0001-aaaa"]] == [
        {"kind": "pod", "uid": "team-a/chat-a", "namespace": "team-a", "name": "chat-a", "container": "app"},
        {"kind": "pod", "uid": "team-c/chat-b", "namespace": "team-c", "name": "chat-b", "container": "app"},
    ]
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2
    assert messages[0].startswith(f"kubelet pods {kubelet.url}: ") and "Connection refused" in messages[0]
    assert messages[0].endswith("; pod names and labels unknown until it answers")
    assert messages[1] == f"kubelet pods {kubelet.url} answers again"
    assert len(kubelet.requests) == 1  # the second observation did not knock again


def test_the_run_command_builds_the_pod_list_from_its_keys(tmp_path, token_file, fake_nvml):
    path = tmp_path / "agent.conf"
    path.write_text(
        f"[agent]\nattribution_nvml = on\nattribution_cgroups = on\nprocfs = {tmp_path}\n"
        f"kubelet_pods_url = http://127.0.0.1:10255/\nkubelet_token_file = {token_file}\n"
        "pod_labels = app, app.kubernetes.io/*\n"
    )
    config = config_load(flags={}, environ={}, config_path=str(path))

    attributor = _attributor(config)

    assert attributor is not None and attributor.pod_list is not None
    assert attributor.pod_list.url == "http://127.0.0.1:10255/pods"
    assert attributor.pod_list.token_file == str(token_file)
    assert attributor.sources.pod_labels == ("app", "app.kubernetes.io/*")
