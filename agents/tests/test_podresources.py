"""The kubelet's pod-resources v1 API against a real gRPC server on a unix socket (the protocol
real, the kubelet's answers scripted), and the agent's holders built from it, NVML (mocked, MIG
included) and a fake /proc."""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from concurrent import futures
from types import SimpleNamespace

import pytest
from conftest import (
    FakeGpu,
    fake_process,
)  # this folder (no __init__.py): the root tests package must not shadow it
from kubelet_http import KubeletHttp
from kubelet_http import pod as listed_pod

try:
    import grpc
except ImportError:  # the agent's `kubernetes` extra; CI installs it, so there it must run
    if os.environ.get("CI"):
        raise
    pytest.skip("grpcio is not installed (pip install './agents[kubernetes]')", allow_module_level=True)

from accelboard_agent.attribution import Attributor, Sources
from accelboard_agent.cli import main
from accelboard_agent.daemon import Agent
from accelboard_agent.gpus import nvml_open
from accelboard_agent.podresources import KubeletError, PodDevice, PodResourcesClient, WireError, wire_fields

# -- protobuf encoding, as the kubelet does it --------------------------------------------------


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | 0x80 if value else byte)
        if not value:
            return bytes(out)


def _field(number: int, value: bytes | str | int) -> bytes:
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    raw = value.encode() if isinstance(value, str) else value
    return _varint(number << 3 | 2) + _varint(len(raw)) + raw


def encode_pods(pods: list[dict]) -> bytes:
    """ListPodResourcesResponse{pod_resources=1: PodResources{name=1, namespace=2, containers=3:
    ContainerResources{name=1, devices=2: ContainerDevices{resource_name=1, device_ids=2,
    topology=3}, cpu_ids=3, memory=4}}}: with the fields the agent skips filled in too."""
    out = b""
    for pod in pods:
        containers = b""
        for container in pod["containers"]:
            body = _field(1, container["name"])
            for resource, ids in container.get("devices", []):
                topology = _field(1, _field(1, 0))  # TopologyInfo{nodes=1: NUMANode{ID=1: 0}}
                body += _field(
                    2, _field(1, resource) + b"".join(_field(2, i) for i in ids) + _field(3, topology)
                )
            body += _field(3, _varint(2) + _varint(3))  # cpu_ids, packed
            body += _field(4, _field(1, "memory") + _field(2, 1 << 33))  # ContainerMemory{size_bytes}
            containers += _field(3, body)
        out += _field(1, _field(1, pod["name"]) + _field(2, pod["namespace"]) + containers)
    return out


class Kubelet:
    """A gRPC server answering ``/v1.PodResourcesLister/List`` with ``pods``, or ``error``."""

    def __init__(self, path: str) -> None:
        self.target = f"unix://{path}"
        self.pods: list[dict] = []
        self.error: grpc.StatusCode | None = None
        self.calls = 0
        handler = grpc.method_handlers_generic_handler(
            "v1.PodResourcesLister",
            {
                "List": grpc.unary_unary_rpc_method_handler(
                    self._list, request_deserializer=lambda data: data, response_serializer=encode_pods
                )
            },
        )
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        self.server.add_generic_rpc_handlers((handler,))
        self.server.add_insecure_port(self.target)
        self.server.start()

    def _list(self, request: bytes, context: grpc.ServicerContext) -> list[dict]:
        self.calls += 1
        assert request == b"", "ListPodResourcesRequest has no fields"
        if self.error is not None:
            context.abort(self.error, "scripted failure")
        return self.pods

    def stop(self) -> None:
        self.server.stop(None)


@pytest.fixture
def kubelet(tmp_path):
    server = Kubelet(str(tmp_path / "kubelet.sock"))
    yield server
    server.stop()


MIG_POD = {"name": "train-1", "namespace": "team-b", "containers": [{"name": "main", "devices": [("nvidia.com/mig-3g.40gb", ["MIG-fake-0-0"])]}]}  # fmt: skip
VLLM_POD = {"name": "vllm-0", "namespace": "llm", "containers": [{"name": "sidecar"}, {"name": "vllm", "devices": [("nvidia.com/gpu", ["GPU-fake-0001-aaaa"])]}]}  # fmt: skip
CHAT_A = {"name": "chat-a", "namespace": "team-a", "containers": [{"name": "app", "devices": [("nvidia.com/gpu", ["GPU-fake-0002-aaaa::0"])]}]}  # fmt: skip
CHAT_B = {"name": "chat-b", "namespace": "team-c", "containers": [{"name": "app", "devices": [("nvidia.com/gpu", ["GPU-fake-0002-aaaa::3"])]}]}  # fmt: skip
CPU_POD = {"name": "web", "namespace": "default", "containers": [{"name": "nginx", "devices": [("example.com/fpga", ["f0"])]}]}  # fmt: skip


def test_it_reads_which_pod_holds_each_gpu_and_mig_device_over_the_socket(kubelet):
    kubelet.pods = [MIG_POD, VLLM_POD, CHAT_A, CHAT_B, CPU_POD]
    client = PodResourcesClient(kubelet.target, timeout=2.0)
    try:
        held = client.devices()
    finally:
        client.close()

    assert held == [
        PodDevice("team-b", "train-1", "main", "MIG-fake-0-0"),
        PodDevice("llm", "vllm-0", "vllm", "GPU-fake-0001-aaaa"),
        PodDevice("team-a", "chat-a", "app", "GPU-fake-0002-aaaa"),  # time-slicing replica ::0 cut off
        PodDevice("team-c", "chat-b", "app", "GPU-fake-0002-aaaa"),
    ]
    assert kubelet.calls == 1


def test_it_says_what_the_kubelet_answered_when_it_fails(kubelet, tmp_path):
    kubelet.error = grpc.StatusCode.PERMISSION_DENIED
    client = PodResourcesClient(kubelet.target, timeout=2.0)
    with pytest.raises(KubeletError, match="PERMISSION_DENIED: scripted failure"):
        client.devices()
    client.close()
    nobody = PodResourcesClient(f"unix://{tmp_path}/absent.sock", timeout=0.5)
    with pytest.raises(KubeletError, match="UNAVAILABLE"):
        nobody.devices()
    nobody.close()


def test_it_refuses_malformed_protobuf():
    with pytest.raises(WireError, match="truncated"):
        wire_fields(_field(1, "abc")[:-1])
    with pytest.raises(WireError, match="wire type"):
        wire_fields(bytes([1 << 3 | 3]))


def _host(fake_nvml, tmp_path):
    """GPU 0 in MIG mode (a 3-slice and a 4-slice instance), GPU 1 a serving pod's, GPU 2
    time-sliced by two pods, GPU 3 a bare process; procfs a fake tree."""
    gpus = [FakeGpu(0, mig_layout={0: 3, 2: 4}), FakeGpu(1), FakeGpu(2), FakeGpu(3)]
    fake = fake_nvml(gpus)
    procfs = tmp_path / "proc"
    pod = (
        "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice/cri-containerd-{}.scope\n"
    )
    fake_process(procfs, 501, cgroup=pod.format("11111111_1111_1111_1111_111111111111", "a" * 64))
    fake_process(procfs, 601, cgroup=pod.format("22222222_2222_2222_2222_222222222222", "b" * 64))
    fake_process(
        procfs, 701, cgroup=pod.format("33333333_3333_3333_3333_333333333333", "c" * 64), hostname="chat-a"
    )
    fake_process(
        procfs, 702, cgroup=pod.format("44444444_4444_4444_4444_444444444444", "d" * 64), hostname="chat-b"
    )
    fake_process(
        procfs, 801, cgroup="0::/user.slice/user-1000.slice/session-4.scope\n", comm="bench", start=555
    )
    gpus[1].processes = [SimpleNamespace(pid=601, usedGpuMemory=40 << 30)]
    gpus[1].process_util = [(601, 80)]
    gpus[2].processes = [
        SimpleNamespace(pid=701, usedGpuMemory=8 << 30),
        SimpleNamespace(pid=702, usedGpuMemory=4 << 30),
    ]
    gpus[2].process_util = [(701, 60), (702, 20)]
    gpus[3].processes = [SimpleNamespace(pid=801, usedGpuMemory=None)]
    backend = nvml_open()
    backend.instances(backend.devices[0])[0].handle.processes = [
        SimpleNamespace(pid=501, usedGpuMemory=20 << 30)
    ]
    return fake, backend, str(procfs)


def test_it_joins_nvml_cgroups_and_the_kubelet_into_each_devices_holders(fake_nvml, kubelet, tmp_path):
    kubelet.pods = [MIG_POD, VLLM_POD, CHAT_A, CHAT_B, CPU_POD]
    _, backend, procfs = _host(fake_nvml, tmp_path)
    attributor = Attributor(Sources(nvml=True, cgroups=True, procfs=procfs, kubelet_socket=kubelet.target))

    holdings = attributor.observe(backend, backend.devices)
    attributor.close()

    brief = {
        gpu: [
            (h.workload["uid"], h.workload.get("container"), h.share, h.basis, h.sm_util, h.memory_bytes)
            for h in held
        ]
        for gpu, held in holdings.items()
    }
    assert brief == {
        # The MIG GPU holds nothing itself: its instances do; the 4-slice one nobody (idle).
        "MIG-fake-0-0": [("team-b/train-1", "main", 1.0, "exclusive", None, 20 << 30)],
        "MIG-fake-0-2": [],
        "GPU-fake-0001-aaaa": [("llm/vllm-0", "vllm", 1.0, "exclusive", 80.0, 40 << 30)],
        # Two pods on one GPU, told apart by their HOSTNAME; split 60:20 as measured.
        "GPU-fake-0002-aaaa": [
            ("team-a/chat-a", "app", 0.75, "measured", 60.0, 8 << 30),
            ("team-c/chat-b", "app", 0.25, "measured", 20.0, 4 << 30),
        ],
        "GPU-fake-0003-aaaa": [("801@555", None, 1.0, "exclusive", None, None)],
    }
    assert holdings["GPU-fake-0001-aaaa"][0].workload == {
        "kind": "pod", "uid": "llm/vllm-0", "namespace": "llm", "name": "vllm-0", "container": "vllm",
    }  # fmt: skip
    assert holdings["GPU-fake-0003-aaaa"][0].workload == {
        "kind": "process",
        "uid": "801@555",
        "name": "bench",
    }


def test_without_the_kubelet_pods_are_named_by_their_cgroups_uid_and_a_kubelet_away_is_said_once(
    fake_nvml, tmp_path, caplog
):
    _, backend, procfs = _host(fake_nvml, tmp_path)
    attributor = Attributor(
        Sources(
            nvml=True, cgroups=True, procfs=procfs, kubelet_socket=f"unix://{tmp_path}/gone.sock", timeout=0.3
        )
    )
    with caplog.at_level(logging.WARNING):
        first = attributor.observe(backend, backend.devices)
        attributor.observe(backend, backend.devices)
    attributor.close()

    assert first["GPU-fake-0001-aaaa"][0].workload == {
        "kind": "pod", "uid": "22222222-2222-2222-2222-222222222222", "container": "b" * 12,
    }  # fmt: skip
    assert [r.getMessage() for r in caplog.records if "kubelet" in r.getMessage()][0].startswith(
        "kubelet unix://"
    )
    assert sum("kubelet" in r.getMessage() for r in caplog.records) == 1


DUAL_POD = {"name": "dual", "namespace": "team-d", "containers": [{"name": "left", "devices": [("nvidia.com/gpu", ["GPU-fake-0001-aaaa::1"])]}, {"name": "right", "devices": [("nvidia.com/gpu", ["GPU-fake-0001-aaaa::2"])]}]}  # fmt: skip


def test_the_pod_list_labels_pods_and_tells_time_sliced_pods_apart_by_their_uid(fake_nvml, kubelet, tmp_path):
    """Two pods time-slice GPU 0, their processes without HOSTNAME: their cgroups' UIDs, named by
    the pod list, say which is which. One pod holds two replicas of GPU 1 (two containers): one
    holder, as the server keys workloads (kind, uid)."""
    kubelet.pods = [CHAT_A, CHAT_B, DUAL_POD]
    gpus = [FakeGpu(0), FakeGpu(1)]
    fake_nvml(gpus)
    procfs = tmp_path / "proc"
    cgroup = "0::/kubepods/burstable/pod{}/{}\n"  # the cgroupfs driver's shape
    fake_process(procfs, 701, cgroup=cgroup.format("33333333-3333-3333-3333-333333333333", "c" * 64))
    fake_process(procfs, 702, cgroup=cgroup.format("44444444-4444-4444-4444-444444444444", "d" * 64))
    gpus[0].processes = [
        SimpleNamespace(pid=701, usedGpuMemory=8 << 30),
        SimpleNamespace(pid=702, usedGpuMemory=4 << 30),
    ]
    gpus[0].process_util = [(701, 30), (702, 10)]
    gpus[1].processes = []
    pod_list = KubeletHttp()  # the read-only port: no token
    pod_list.pods = [
        listed_pod("team-a", "chat-a", "33333333-3333-3333-3333-333333333333", labels={"app": "chat", "team": "a"},
            containers={"app": "c" * 64}),
        listed_pod("team-c", "chat-b", "44444444-4444-4444-4444-444444444444", labels={"app": "chat", "team": "c"},
            containers={"app": "d" * 64}),
        listed_pod("team-d", "dual", "dddddddd-dddd-dddd-dddd-dddddddddddd", labels={"app": "dual"},
            containers={"left": "1" * 64, "right": "2" * 64}),
    ]  # fmt: skip
    pod_list.start()
    try:
        attributor = Attributor(
            Sources(
                nvml=True, cgroups=True, procfs=str(procfs), kubelet_socket=kubelet.target,
                kubelet_pods_url=pod_list.url, pod_labels=("app", "team"), timeout=2.0,
            )
        )  # fmt: skip
        holdings = attributor.observe(nvml_open(), nvml_open().devices)
        attributor.close()
    finally:
        pod_list.stop()

    assert [(h.workload, h.share, h.basis, h.memory_bytes) for h in holdings["GPU-fake-0000-aaaa"]] == [
        ({"kind": "pod", "uid": "team-a/chat-a", "namespace": "team-a", "name": "chat-a", "container": "app",
          "labels": {"app": "chat", "team": "a"}}, 0.75, "measured", 8 << 30),
        ({"kind": "pod", "uid": "team-c/chat-b", "namespace": "team-c", "name": "chat-b", "container": "app",
          "labels": {"app": "chat", "team": "c"}}, 0.25, "measured", 4 << 30),
    ]  # fmt: skip
    assert [(h.workload, h.share, h.basis, h.key) for h in holdings["GPU-fake-0001-aaaa"]] == [
        ({"kind": "pod", "uid": "team-d/dual", "namespace": "team-d", "name": "dual", "labels": {"app": "dual"}},
         1.0, "exclusive", "pod|team-d/dual|"),
    ]  # fmt: skip
    assert len(pod_list.requests) == 1


def test_the_agent_ships_intervals_and_mig_instances_with_its_batches(fake_nvml, kubelet, tmp_path, server):
    kubelet.pods = [MIG_POD, VLLM_POD, CHAT_A, CHAT_B]
    _, backend, procfs = _host(fake_nvml, tmp_path)
    attributor = Attributor(Sources(nvml=True, cgroups=True, procfs=procfs, kubelet_socket=kubelet.target))
    agent = Agent(
        backend=backend,
        spool_path=str(tmp_path / "spool.db"),
        hostname="k8s-node-1",
        interval=0.05,
        slow_interval=60.0,
        sender_options={
            "server": server.url,
            "token": "test-token",
            "send_interval": 0.1,
            "batch_max_samples": 12,
            "attribution_cut_interval": 0.2,
        },
        spool_max_samples=10_000,
        attributor=attributor,
        attribution_interval=0.1,
    )
    thread = threading.Thread(target=agent.run)
    thread.start()
    try:
        assert server.wait_for(
            lambda: sum(len(b.get("attribution", [])) for b in server.stored("/api/v1/telemetry")) >= 20
        )
    finally:
        agent.stop.set()
        thread.join(5)
    batches = server.stored("/api/v1/telemetry")

    accelerators = {a["uuid"]: a for a in batches[-1]["accelerators"]}
    assert (
        accelerators["GPU-fake-0000-aaaa"]["compute_slices"] == 7
        and accelerators["GPU-fake-0000-aaaa"]["mig_mode"]
    )
    assert {k: accelerators["MIG-fake-0-0"][k] for k in ("mig_mode", "parent_uuid", "compute_slices")} == {
        "mig_mode": True, "parent_uuid": "GPU-fake-0000-aaaa", "compute_slices": 3,
    }  # fmt: skip
    assert accelerators["MIG-fake-0-2"]["compute_slices"] == 4
    intervals = [item for batch in batches for item in batch.get("attribution", [])]
    keys = set(intervals[0]) | {"memory_bytes", "sm_util"}
    assert keys == {"gpu", "start", "end", "workload", "share", "basis", "memory_bytes", "sm_util"}
    assert all(i["end"] > i["start"] and 0 < i["share"] <= 1 for i in intervals)
    # Per device and workload: back to back, never overlapping, never twice (cut at batches).
    by_key: dict[tuple, list] = {}
    for item in intervals:
        by_key.setdefault((item["gpu"], item["workload"]["uid"]), []).append((item["start"], item["end"]))
    assert set(by_key) == {
        ("MIG-fake-0-0", "team-b/train-1"), ("GPU-fake-0001-aaaa", "llm/vllm-0"),
        ("GPU-fake-0002-aaaa", "team-a/chat-a"), ("GPU-fake-0002-aaaa", "team-c/chat-b"),
        ("GPU-fake-0003-aaaa", "801@555"),
    }  # fmt: skip
    for spans in by_key.values():
        spans.sort()
        assert all(a[1] == b[0] for a, b in zip(spans, spans[1:])), spans
    # Each batch's intervals end by its last sample.
    for batch in batches:
        if batch.get("attribution"):
            assert max(i["end"] for i in batch["attribution"]) <= max(s["time"] for s in batch["samples"])
    assert json.dumps(intervals)  # plain JSON


def test_the_kubernetes_source_without_grpcio_says_how_to_install_it(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "grpc", None)  # `import grpc` raises ImportError

    code = main(
        ["run", "--simulate", "1", "--token", "t", "--spool", str(tmp_path / "s.db"), "--kubelet", "on"]
    )

    assert code == 2
    assert "pip install 'accelboard-agent[kubernetes]'" in capsys.readouterr().err
