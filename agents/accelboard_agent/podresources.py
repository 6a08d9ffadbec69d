"""The kubelet's pod-resources API (v1): which pod and container hold which GPU or MIG device.

1. One gRPC unary call, ``/v1.PodResourcesLister/List``, on the kubelet's unix socket
   (``unix:///var/lib/kubelet/pod-resources/kubelet.sock``). No generated protobuf code: the few
   messages are encoded and decoded here by hand (proto3 wire format), with the field numbers of
   ``k8s.io/kubelet/pkg/apis/podresources/v1/api.proto``:
   ``ListPodResourcesResponse{pod_resources=1}``, ``PodResources{name=1, namespace=2,
   containers=3}``, ``ContainerResources{name=1, devices=2, cpu_ids=3, memory=4,
   dynamic_resources=5}``, ``ContainerDevices{resource_name=1, device_ids=2, topology=3}``.
   Fields not named here are skipped by their wire type, as protobuf readers must.
2. ``grpcio`` (the agent's ``kubernetes`` extra) is imported only when the Kubernetes source is
   switched on; without it ``KubeletError`` says how to install it.
3. Device ids map to pods: ``nvidia.com/gpu`` ids are GPU UUIDs (``GPU-...``, with a ``::<n>``
   replica suffix under time-slicing, cut off here), ``nvidia.com/mig-*`` ids are MIG UUIDs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

LIST_METHOD = "/v1.PodResourcesLister/List"
GPU_RESOURCES = ("nvidia.com/gpu", "nvidia.com/mig-")


class KubeletError(Exception):
    """The pod-resources API cannot be read; the message is one line for the operator."""


class WireError(ValueError):
    """Bytes that are not a well-formed protobuf message."""


@dataclass(frozen=True)
class PodDevice:
    """A pod's container holding one device (GPU or MIG UUID)."""

    namespace: str
    pod: str
    container: str
    device: str


# -- protobuf wire format ---------------------------------------------------------------------


def _read_varint(data: bytes, position: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if position >= len(data):
            raise WireError("truncated varint")
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, position
        shift += 7
        if shift > 63:
            raise WireError("varint longer than 10 bytes")


def wire_fields(data: bytes) -> list[tuple[int, Any]]:
    """(field number, value) of every field of one message: ints for varints and fixed fields,
    bytes for length-delimited ones."""
    fields: list[tuple[int, Any]] = []
    position = 0
    while position < len(data):
        key, position = _read_varint(data, position)
        number, wire_type = key >> 3, key & 7
        if number == 0:
            raise WireError("field number 0")
        value: int | bytes
        if wire_type == 0:
            value, position = _read_varint(data, position)
        elif wire_type == 1:
            value, position = int.from_bytes(data[position : position + 8], "little"), position + 8
        elif wire_type == 2:
            length, position = _read_varint(data, position)
            value, position = data[position : position + length], position + length
        elif wire_type == 5:
            value, position = int.from_bytes(data[position : position + 4], "little"), position + 4
        else:
            raise WireError(f"unsupported wire type {wire_type}")
        if position > len(data):
            raise WireError("truncated field")
        fields.append((number, value))
    return fields


def _text(value: Any) -> str:
    if not isinstance(value, bytes):
        raise WireError("a string field is not length-delimited")
    return value.decode("utf-8", "replace")


def list_request_encode(_request: object = None) -> bytes:
    """``ListPodResourcesRequest`` has no fields: the empty message."""
    return b""


def list_response_decode(data: bytes) -> list[PodDevice]:
    """A ``ListPodResourcesResponse`` as the GPU and MIG devices its containers hold."""
    held: list[PodDevice] = []
    for number, pod in wire_fields(data):
        if number != 1:
            continue
        name = namespace = ""
        containers: list[bytes] = []
        for field, value in wire_fields(pod):
            if field == 1:
                name = _text(value)
            elif field == 2:
                namespace = _text(value)
            elif field == 3:
                containers.append(value)
        for container in containers:
            container_name = ""
            devices: list[bytes] = []
            for field, value in wire_fields(container):
                if field == 1:
                    container_name = _text(value)
                elif field == 2:
                    devices.append(value)
            for device in devices:
                resource = ""
                ids: list[str] = []
                for field, value in wire_fields(device):
                    if field == 1:
                        resource = _text(value)
                    elif field == 2:
                        ids.append(_text(value))
                if not resource.startswith(GPU_RESOURCES):
                    continue
                for device_id in ids:
                    held.append(PodDevice(namespace, name, container_name, device_id.split("::", 1)[0]))
    return held


# -- the client -------------------------------------------------------------------------------


def grpc_import() -> Any:
    try:
        import grpc
    except ImportError:
        raise KubeletError(
            "kubelet: the Kubernetes source needs grpcio; install the agent with its extra: "
            "pip install 'accelboard-agent[kubernetes]'"
        ) from None
    return grpc


class PodResourcesClient:
    """``List`` on the kubelet's socket; one channel kept open for the agent's life."""

    def __init__(self, target: str, *, timeout: float = 5.0) -> None:
        self.grpc = grpc_import()
        self.target = target
        self.timeout = timeout
        self._channel = self.grpc.insecure_channel(target)
        self._list = self._channel.unary_unary(
            LIST_METHOD,
            request_serializer=list_request_encode,
            response_deserializer=list_response_decode,
        )

    def devices(self) -> list[PodDevice]:
        """The GPU and MIG devices pods hold now; ``KubeletError`` when the kubelet cannot say."""
        try:
            return list(self._list(None, timeout=self.timeout))
        except self.grpc.RpcError as exc:
            code = exc.code() if hasattr(exc, "code") else None
            details = exc.details() if hasattr(exc, "details") else str(exc)
            raise KubeletError(f"kubelet {self.target}: {code}: {details}") from None

    def close(self) -> None:
        self._channel.close()
