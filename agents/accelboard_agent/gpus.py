"""Reading GPUs: NVML through ``nvidia-ml-py`` (import ``pynvml``), or simulated GPUs for demos.

1. ``nvml_open`` initialises NVML; no driver or no library raises ``NoGpu`` with one readable line.
2. Every signal of every GPU goes through ``NvmlBackend._read``: the first ``NotSupported``,
   ``NoPermission`` or ``FunctionNotFound`` (or a function missing from an old ``pynvml``) marks the
   signal unsupported for that GPU; it is never called again and is reported to the server in
   the accelerator's ``unsupported`` list. Other errors give NULL for that one reading.
3. Hot signals (energy, power, utilisation, memory, clocks, temperature, throttle reasons, ECC,
   XID events) are microsecond calls; the slow ones (PCIe throughput blocks ~20 ms, process lists, NVLink,
   retired pages and remapped rows) are only read by ``slow`` from a separate thread.
4. Units leave here as the API wants them: W, mJ, %, bytes, MHz, degrees C.
5. XID errors come as NVML events, not as a readable counter: every GPU is registered for
   critical XID events at start, and each sampling tick (``tick``) drains the waiting events
   without blocking (a 0 ms wait) into a per-GPU count since the agent started, sent as ``xid_errors``. The server
   counts increases of it (a restart back to 0 is a reset, not errors); each XID is logged with
   its code.
6. Profiling counters: on GPUs with NVML's GPU Performance Monitoring (GPM: Hopper and later, a
   recent driver), each tick takes a GPM sample and sends the metrics between it and the previous
   tick's (``GPM_METRICS``: tensor-pipe, DRAM bandwidth, SM activity and occupancy, graphics
   engine, in %, the fields DCGM's counters fill). A GPU, driver or ``pynvml`` without GPM, or a
   MIG instance, is skipped cleanly: no fields, no error, not listed as unsupported (older GPUs
   never had it); an error taking a sample drops that tick's values only.

Tests replace ``pynvml`` functions at this module boundary (``gpus.pynvml``).
"""

from __future__ import annotations

import abc
import logging
import math
import random
import socket
import threading
import time
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable

import pynvml

# The NVML errors that mean "this GPU (or this driver, or this user) cannot give that signal":
# remembered per GPU and never asked again. Anything else is a transient NULL.
_PERMANENT_ERRORS = {
    pynvml.NVML_ERROR_NOT_SUPPORTED: "not_supported",
    pynvml.NVML_ERROR_NO_PERMISSION: "no_permission",
    pynvml.NVML_ERROR_FUNCTION_NOT_FOUND: "function_not_found",
}

log = logging.getLogger("accelboard_agent.gpus")

# NVML GPM metric (the pynvml constant's name) -> the telemetry API's profiling field, in %.
GPM_METRICS = {
    "NVML_GPM_METRIC_GRAPHICS_UTIL": "gr_engine_active",
    "NVML_GPM_METRIC_SM_UTIL": "sm_active",
    "NVML_GPM_METRIC_SM_OCCUPANCY": "sm_occupancy",
    "NVML_GPM_METRIC_ANY_TENSOR_UTIL": "tensor_active",
    "NVML_GPM_METRIC_DRAM_BW_UTIL": "dram_active",
}


@dataclass
class _Gpm:
    """A GPU's two GPM sample buffers: the previous tick's and the one the next tick fills."""

    previous: Any
    spare: Any
    primed: bool = False


SIMULATED_NAME = "Simulated H100 80GB HBM3"
SIMULATED_MEMORY = 85_520_809_984


class NoGpu(Exception):
    """No NVIDIA driver, library or GPU on this host; the message is one line for the operator."""


@dataclass
class Device:
    uuid: str
    index: int
    name: str = ""
    serial: str = ""
    memory_bytes: int | None = None
    power_limit_w: float | None = None
    mig_mode: bool = False
    parent_uuid: str = ""
    handle: Any = None
    # Critical XID events seen since the agent started; None where the GPU cannot report them.
    xid_errors: int | None = None
    # MIG: a GPU's total compute slices (7 on A100/H100), an instance's own (``1g.10gb`` = 1).
    compute_slices: int | None = None
    # signal -> why ("not_supported", "no_permission", "function_not_found", "mig", "missing")
    unsupported: dict[str, str] = field(default_factory=dict)

    def accelerator(self, driver_version: str, *, slices: bool = False) -> dict[str, Any]:
        """The ``accelerators[]`` item of the telemetry API; ``slices`` (attribution on) adds
        ``compute_slices`` where known (docs/attribution.md)."""
        item = {
            "uuid": self.uuid,
            "index": self.index,
            "name": self.name,
            "serial": self.serial,
            "memory_bytes": self.memory_bytes,
            "power_limit_w": self.power_limit_w,
            "driver_version": driver_version,
            "mig_mode": self.mig_mode,
            "parent_uuid": self.parent_uuid,
            "unsupported": self.unsupported_signals(),
        }
        if slices and self.compute_slices is not None:
            item["compute_slices"] = self.compute_slices
        return item

    def unsupported_signals(self) -> list[str]:
        # The clocks-event name failing is only news if the older throttle-reasons call failed too.
        hidden = {"throttle_events"} if "throttle_reasons" not in self.unsupported else set()
        return sorted(set(self.unsupported) - hidden)


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _field_value(item: Any) -> float:
    """The number in an ``nvmlFieldValue_t`` according to its ``valueType``."""
    kind = getattr(item, "valueType", 1)
    union = item.value
    attribute = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}.get(
        kind, "uiVal"
    )
    return float(getattr(union, attribute))


@dataclass
class ProcessUse:
    """A compute process on a GPU or MIG instance."""

    pid: int
    memory_bytes: int | None = None
    # Its SM utilisation in %, averaged since the last reading, where the driver measures it.
    sm_util: float | None = None
    # The process's ``/proc/<pid>/cgroup`` text and start time, where the backend knows them
    # itself (simulated GPUs); None: read them from procfs.
    cgroup: str | None = None
    start: str | None = None
    name: str = ""


class Backend(abc.ABC):
    """What the sampler, the slow scanner and ``bench`` need from a source of GPU readings."""

    simulated = False
    driver_version = ""
    cuda_version = ""
    devices: list[Device]

    def tick(self) -> None:
        """Once per sampling tick, before the GPUs are sampled: work shared by all of them."""
        return None

    @abc.abstractmethod
    def sample(self, device: Device) -> dict[str, Any]:
        raise NotImplementedError

    @abc.abstractmethod
    def energy_mj(self, device: Device) -> int | None:
        raise NotImplementedError

    @abc.abstractmethod
    def power_instant_w(self, device: Device) -> float | None:
        raise NotImplementedError

    @abc.abstractmethod
    def memory_used_bytes(self, device: Device) -> int | None:
        raise NotImplementedError

    @abc.abstractmethod
    def slow(self, device: Device) -> dict[str, Any]:
        raise NotImplementedError

    def facts(self) -> dict[str, Any]:
        return {}

    def instances(self, device: Device) -> list[Device]:
        """The MIG instances of a GPU in MIG mode (none otherwise)."""
        return []

    def processes(self, device: Device) -> list[ProcessUse]:
        """The compute processes on a GPU or MIG instance now."""
        return []

    def close(self) -> None:
        return None


class NvmlBackend(Backend):
    def __init__(self) -> None:
        self.devices = []
        self.transient_errors = 0
        self._mig: dict[str, list[dict[str, Any]]] = {}
        self._instances: dict[str, list[Device]] = {}
        # Per device, the newest per-process utilisation sample read (NVML timestamps, us).
        self._util_seen: dict[str, int] = {}
        self._lock = threading.Lock()
        self._event_set: Any = None
        # Per device uuid: its GPM buffers, or False where GPM is not available (point 6).
        self._gpm: dict[str, _Gpm | bool] = {}

    # -- probing -------------------------------------------------------------------------------
    def _read(self, device: Device, signal: str, function_name: str, *args: Any) -> Any:
        if signal in device.unsupported:
            return None
        function: Callable[..., Any] | None = getattr(pynvml, function_name, None)
        if function is None:
            device.unsupported[signal] = "missing"
            return None
        try:
            return function(*args)
        except pynvml.NVMLError as exc:
            reason = _PERMANENT_ERRORS.get(exc.value)
            if reason:
                device.unsupported[signal] = reason
            else:
                with self._lock:
                    self.transient_errors += 1
            return None

    def open(self) -> None:
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            raise NoGpu(f"no NVIDIA driver available ({exc.__class__.__name__}: {exc})") from None
        except OSError as exc:  # libnvidia-ml present but unloadable
            raise NoGpu(f"no NVIDIA driver available ({exc})") from None
        try:
            self.driver_version = _text(pynvml.nvmlSystemGetDriverVersion())
        except pynvml.NVMLError:
            self.driver_version = ""
        try:
            cuda = int(pynvml.nvmlSystemGetCudaDriverVersion())
            self.cuda_version = f"{cuda // 1000}.{cuda % 1000 // 10}"
        except (pynvml.NVMLError, AttributeError):
            self.cuda_version = ""
        count = pynvml.nvmlDeviceGetCount()
        if count == 0:
            self.close()
            raise NoGpu("NVIDIA driver loaded but no GPU found")
        for index in range(count):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            device = Device(uuid=_text(pynvml.nvmlDeviceGetUUID(handle)), index=index, handle=handle)
            device.name = _text(self._read(device, "name", "nvmlDeviceGetName", handle) or "")
            device.serial = _text(self._read(device, "serial", "nvmlDeviceGetSerial", handle) or "")
            memory = self._read(device, "memory", "nvmlDeviceGetMemoryInfo", handle)
            device.memory_bytes = int(memory.total) if memory is not None else None
            limit = self._read(device, "power_limit", "nvmlDeviceGetEnforcedPowerLimit", handle)
            device.power_limit_w = limit / 1000.0 if limit is not None else None
            mode = self._read(device, "mig", "nvmlDeviceGetMigMode", handle)
            if mode is not None and mode[0] == getattr(pynvml, "NVML_DEVICE_MIG_ENABLE", 1):
                device.mig_mode = True
                # Utilisation is not reported for a GPU split into MIG instances.
                device.unsupported["utilization"] = "mig"
                self._mig[device.uuid] = self._mig_layout(device)
            self.devices.append(device)
        self._xid_register()

    def _xid_register(self) -> None:
        """Register every GPU for critical XID events; one that cannot reports no XID count."""
        create = getattr(pynvml, "nvmlEventSetCreate", None)
        register = getattr(pynvml, "nvmlDeviceRegisterEvents", None)
        event_type = getattr(pynvml, "nvmlEventTypeXidCriticalError", None)
        if create is None or register is None or event_type is None:
            for device in self.devices:
                device.unsupported["xid"] = "missing"
            return
        try:
            self._event_set = create()
        except pynvml.NVMLError as exc:
            for device in self.devices:
                device.unsupported["xid"] = _PERMANENT_ERRORS.get(exc.value, "error")
            return
        for device in self.devices:
            try:
                register(device.handle, event_type, self._event_set)
            except pynvml.NVMLError as exc:
                device.unsupported["xid"] = _PERMANENT_ERRORS.get(exc.value, "error")
            else:
                device.xid_errors = 0

    def tick(self) -> None:
        self._xid_drain()

    def _xid_drain(self) -> None:
        """Count the XID events waiting (all GPUs share one event set), without blocking; at most
        100 per tick, the rest on the next."""
        if self._event_set is None:
            return
        wait = getattr(pynvml, "nvmlEventSetWait_v2", None) or pynvml.nvmlEventSetWait
        with self._lock:
            for _ in range(100):
                try:
                    data = wait(self._event_set, 0)
                except pynvml.NVMLError as exc:
                    if exc.value != pynvml.NVML_ERROR_TIMEOUT:  # TIMEOUT: nothing waiting
                        self.transient_errors += 1
                    return
                try:
                    uuid = _text(pynvml.nvmlDeviceGetUUID(data.device))
                except pynvml.NVMLError:
                    uuid = ""
                device = next((d for d in self.devices if d.uuid == uuid), None)
                if device is not None and device.xid_errors is not None:
                    device.xid_errors += 1
                log.warning("XID %s on GPU %s", data.eventData, uuid or "(unknown)")

    def _mig_layout(self, device: Device) -> list[dict[str, Any]]:
        instances = []
        top = self._read(device, "mig_count", "nvmlDeviceGetMaxMigDeviceCount", device.handle) or 0
        # As many MIG devices as compute slices: 7 on A100 and H100.
        device.compute_slices = int(top) or None
        children: list[Device] = []
        for slot in range(int(top)):
            try:
                handle = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(device.handle, slot)
            except pynvml.NVMLError:
                continue  # an empty slot
            try:
                memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
                uuid = _text(pynvml.nvmlDeviceGetUUID(handle))
                instances.append({"uuid": uuid, "memory_bytes": int(memory.total)})
            except pynvml.NVMLError:
                continue
            child = Device(
                uuid=uuid,
                index=device.index,
                name=device.name,
                memory_bytes=int(memory.total),
                mig_mode=True,
                parent_uuid=device.uuid,
                handle=handle,
            )
            attributes = self._read(child, "attributes", "nvmlDeviceGetAttributes", handle)
            child.compute_slices = int(attributes.gpuInstanceSliceCount) if attributes is not None else None
            children.append(child)
        self._instances[device.uuid] = children
        return instances

    def instances(self, device: Device) -> list[Device]:
        return list(self._instances.get(device.uuid, []))

    def _process_utilization(self, device: Device) -> dict[int, float] | None:
        """pid -> mean SM utilisation (%) of the samples since the last reading; None when the
        driver does not measure it for this device (a MIG instance, an old driver)."""
        if "process_utilization" in device.unsupported:
            return None
        function = getattr(pynvml, "nvmlDeviceGetProcessUtilization", None)
        if function is None:
            device.unsupported["process_utilization"] = "missing"
            return None
        try:
            samples = function(device.handle, self._util_seen.get(device.uuid, 0))
        except pynvml.NVMLError as exc:
            if exc.value == pynvml.NVML_ERROR_NOT_FOUND:
                return {}  # no sample since the last reading: nobody ran a kernel
            reason = _PERMANENT_ERRORS.get(exc.value)
            if reason:
                device.unsupported["process_utilization"] = reason
            return None
        sums: dict[int, list[float]] = {}
        for item in samples:
            sums.setdefault(int(item.pid), []).append(float(item.smUtil))
            self._util_seen[device.uuid] = max(self._util_seen.get(device.uuid, 0), int(item.timeStamp))
        return {pid: sum(values) / len(values) for pid, values in sums.items()}

    def processes(self, device: Device) -> list[ProcessUse]:
        found = self._read(device, "processes", "nvmlDeviceGetComputeRunningProcesses", device.handle)
        if not found:
            return []
        utilization = self._process_utilization(device)
        uses = []
        for proc in found:
            pid = int(proc.pid)
            memory = getattr(proc, "usedGpuMemory", None)
            sm = utilization.get(pid, 0.0) if utilization is not None else None
            uses.append(
                ProcessUse(pid=pid, memory_bytes=int(memory) if memory is not None else None, sm_util=sm)
            )
        return uses

    # -- GPM profiling metrics (point 6) ---------------------------------------------------------
    def _gpm_open(self, device: Device) -> _Gpm | bool:
        if device.mig_mode or device.parent_uuid:
            return False
        try:
            support = pynvml.nvmlGpmQueryDeviceSupport(device.handle)
            if not getattr(support, "isSupportedDevice", 0):
                return False
            return _Gpm(previous=pynvml.nvmlGpmSampleAlloc(), spare=pynvml.nvmlGpmSampleAlloc())
        except (pynvml.NVMLError, AttributeError):
            return False

    def gpm_metrics(self, device: Device) -> dict[str, float]:
        """The GPM metrics since this device's previous call (none on the first, nor without GPM)."""
        state = self._gpm.get(device.uuid)
        if state is None:
            state = self._gpm[device.uuid] = self._gpm_open(device)
        if not isinstance(state, _Gpm):
            return {}
        try:
            pynvml.nvmlGpmSampleGet(device.handle, state.spare)
        except pynvml.NVMLError:
            with self._lock:
                self.transient_errors += 1
            state.primed = False
            return {}
        state.previous, state.spare = state.spare, state.previous
        if not state.primed:
            state.primed = True
            return {}
        wanted = [(getattr(pynvml, key), name) for key, name in GPM_METRICS.items() if hasattr(pynvml, key)]
        request = pynvml.c_nvmlGpmMetricsGet_t()
        request.version = pynvml.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = len(wanted)
        request.sample1 = state.spare  # the older sample, after the swap
        request.sample2 = state.previous
        for slot, (metric, _name) in enumerate(wanted):
            request.metrics[slot].metricId = metric
        try:
            pynvml.nvmlGpmMetricsGet(request)
        except pynvml.NVMLError:
            with self._lock:
                self.transient_errors += 1
            return {}
        out: dict[str, float] = {}
        for slot, (_metric, name) in enumerate(wanted):
            item = request.metrics[slot]
            value = float(item.value)
            if item.nvmlReturn == pynvml.NVML_SUCCESS and math.isfinite(value) and value >= 0:
                out[name] = min(value, 100.0)
        return out

    def _gpm_free(self) -> None:
        for state in self._gpm.values():
            if isinstance(state, _Gpm):
                for buffer in (state.previous, state.spare):
                    try:
                        pynvml.nvmlGpmSampleFree(buffer)
                    except (pynvml.NVMLError, AttributeError):
                        pass
        self._gpm.clear()

    def close(self) -> None:
        self._gpm_free()
        if self._event_set is not None:
            try:
                pynvml.nvmlEventSetFree(self._event_set)
            except pynvml.NVMLError:
                pass
            self._event_set = None
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass

    # -- hot path ------------------------------------------------------------------------------
    def energy_mj(self, device: Device) -> int | None:
        value = self._read(device, "energy", "nvmlDeviceGetTotalEnergyConsumption", device.handle)
        return int(value) if value is not None else None

    def power_instant_w(self, device: Device) -> float | None:
        """Instant power where the driver has it, else the (1 s averaged) power usage."""
        if "power_instant" not in device.unsupported:
            values = self._read(
                device,
                "power_instant",
                "nvmlDeviceGetFieldValues",
                device.handle,
                [pynvml.NVML_FI_DEV_POWER_INSTANT],
            )
            if values is not None:
                item = values[0]
                if item.nvmlReturn == pynvml.NVML_SUCCESS:
                    return _field_value(item) / 1000.0
                reason = _PERMANENT_ERRORS.get(item.nvmlReturn)
                if reason:
                    device.unsupported["power_instant"] = reason
        value = self._read(device, "power", "nvmlDeviceGetPowerUsage", device.handle)
        return value / 1000.0 if value is not None else None

    def memory_used_bytes(self, device: Device) -> int | None:
        memory = self._read(device, "memory", "nvmlDeviceGetMemoryInfo", device.handle)
        return int(memory.used) if memory is not None else None

    def _throttle(self, device: Device) -> int | None:
        # Renamed "clocks event reasons" in newer drivers; older ones only have the throttle name.
        if "throttle_reasons" in device.unsupported:
            return None
        if "throttle_events" not in device.unsupported:
            value = self._read(
                device, "throttle_events", "nvmlDeviceGetCurrentClocksEventReasons", device.handle
            )
            if value is not None:
                return int(value)
            if "throttle_events" not in device.unsupported:
                return None  # a transient error, not a missing function
        value = self._read(
            device, "throttle_reasons", "nvmlDeviceGetCurrentClocksThrottleReasons", device.handle
        )
        return int(value) if value is not None else None

    def sample(self, device: Device) -> dict[str, Any]:
        handle = device.handle
        sample: dict[str, Any] = {}
        sample["power_w"] = self.power_instant_w(device)
        sample["energy_mj"] = self.energy_mj(device)
        rates = self._read(device, "utilization", "nvmlDeviceGetUtilizationRates", handle)
        sample["gpu_util"] = float(rates.gpu) if rates is not None else None
        sample["mem_util"] = float(rates.memory) if rates is not None else None
        memory = self._read(device, "memory", "nvmlDeviceGetMemoryInfo", handle)
        sample["mem_used_bytes"] = int(memory.used) if memory is not None else None
        sample["mem_total_bytes"] = int(memory.total) if memory is not None else None
        sm = self._read(device, "sm_clock", "nvmlDeviceGetClockInfo", handle, pynvml.NVML_CLOCK_SM)
        sample["sm_clock_mhz"] = sm
        mem = self._read(device, "mem_clock", "nvmlDeviceGetClockInfo", handle, pynvml.NVML_CLOCK_MEM)
        sample["mem_clock_mhz"] = mem
        sample["temperature_c"] = self._read(
            device, "temperature", "nvmlDeviceGetTemperature", handle, pynvml.NVML_TEMPERATURE_GPU
        )
        sample["throttle_reasons"] = self._throttle(device)
        sample["ecc_errors"] = self._read(
            device,
            "ecc",
            "nvmlDeviceGetTotalEccErrors",
            handle,
            pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
            pynvml.NVML_VOLATILE_ECC,
        )
        sample["xid_errors"] = device.xid_errors  # as of this tick's drain (``tick``)
        sample.update(self.gpm_metrics(device))
        return sample

    # -- slow path -----------------------------------------------------------------------------
    def slow(self, device: Device) -> dict[str, Any]:
        handle = device.handle
        result: dict[str, Any] = {}
        tx = self._read(device, "pcie", "nvmlDeviceGetPcieThroughput", handle, pynvml.NVML_PCIE_UTIL_TX_BYTES)
        rx = self._read(device, "pcie", "nvmlDeviceGetPcieThroughput", handle, pynvml.NVML_PCIE_UTIL_RX_BYTES)
        result["pcie_tx_kbps"] = tx
        result["pcie_rx_kbps"] = rx
        active = []
        if "nvlink" not in device.unsupported:
            for link in range(getattr(pynvml, "NVML_NVLINK_MAX_LINKS", 18)):
                state = self._read(device, "nvlink", "nvmlDeviceGetNvLinkState", handle, link)
                if state is None:
                    break  # past the last link (or no NVLink at all: marked unsupported)
                if state:
                    active.append(link)
        result["nvlink_active_links"] = active
        if active:
            fields = []
            for link in active:
                fields.append((pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, link))
                fields.append((pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, link))
            values = self._read(device, "nvlink_throughput", "nvmlDeviceGetFieldValues", handle, fields)
            if values is not None:
                ok = [item for item in values if item.nvmlReturn == pynvml.NVML_SUCCESS]
                result["nvlink_tx_kib"] = sum(_field_value(i) for i in ok[0::2]) if ok else None
                result["nvlink_rx_kib"] = sum(_field_value(i) for i in ok[1::2]) if ok else None
        processes = self._read(device, "processes", "nvmlDeviceGetComputeRunningProcesses", handle)
        if processes is not None:
            result["processes"] = [
                {
                    "pid": int(proc.pid),
                    "name": _process_name(int(proc.pid)),
                    "used_memory_bytes": proc.usedGpuMemory,
                }
                for proc in processes
            ]
        pages = self._read(
            device,
            "retired_pages",
            "nvmlDeviceGetRetiredPages",
            handle,
            pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR,
        )
        result["retired_pages_dbe"] = len(pages) if pages is not None else None
        rows = self._read(device, "remapped_rows", "nvmlDeviceGetRemappedRows", handle)
        if rows is not None:
            result["remapped_rows"] = {
                "correctable": rows[0],
                "uncorrectable": rows[1],
                "pending": bool(rows[2]),
                "failure": bool(rows[3]),
            }
        return result

    def facts(self) -> dict[str, Any]:
        return {"mig": self._mig} if self._mig else {}


def _process_name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError:
        return ""


def nvml_open() -> NvmlBackend:
    backend = NvmlBackend()
    backend.open()
    return backend


class SimulatedBackend(Backend):
    """N labelled synthetic GPUs with plausible load cycles, for demos, tests and overhead runs.

    Each GPU cycles through idle, ramp and busy phases (period ``period_s``, offset per GPU so
    the host grid is not in lockstep); power follows utilisation, and the energy counter is the
    integral of that power, so counter energy and integrated power agree as on real hardware.
    """

    simulated = True
    driver_version = "550.54.15"
    cuda_version = "12.4"

    def __init__(self, count: int, *, hostname: str = "", period_s: float = 120.0, seed: int = 0) -> None:
        host = hostname or socket.gethostname()
        self.devices = [
            Device(
                uuid=f"GPU-SIM-{host}-{index}",
                index=index,
                name=SIMULATED_NAME,
                serial=f"SIM{index:09d}",
                memory_bytes=SIMULATED_MEMORY,
                power_limit_w=700.0,
            )
            for index in range(count)
        ]
        self.period_s = period_s
        self._random = random.Random(seed)
        self._start = time.time()
        self._energy: dict[str, float] = {d.uuid: 1.0e9 + d.index * 1.0e7 for d in self.devices}
        self._last: dict[str, float] = {d.uuid: self._start for d in self.devices}
        self._lock = threading.Lock()

    def _load(self, device: Device, now: float) -> float:
        phase = ((now - self._start) / self.period_s + device.index / max(len(self.devices), 1)) % 1.0
        if phase < 0.3:
            return 0.0
        if phase < 0.4:
            return (phase - 0.3) / 0.1
        return 0.9 + 0.1 * math.sin(now / 3.0 + device.index)

    def _power(self, device: Device, now: float) -> float:
        return 70.0 + 580.0 * self._load(device, now)

    def _advance(self, device: Device, now: float) -> float:
        with self._lock:
            last = self._last[device.uuid]
            if now > last:
                # Trapezoid over the elapsed time, in steps so long gaps follow the load curve.
                steps = max(1, int((now - last) / 0.5))
                width = (now - last) / steps
                for step in range(steps):
                    a = last + step * width
                    self._energy[device.uuid] += (
                        (self._power(device, a) + self._power(device, a + width)) / 2 * width * 1000
                    )
                self._last[device.uuid] = now
            return self._energy[device.uuid]

    def energy_mj(self, device: Device) -> int | None:
        return int(self._advance(device, time.time()))

    def power_instant_w(self, device: Device) -> float | None:
        return round(self._power(device, time.time()), 1)

    def memory_used_bytes(self, device: Device) -> int | None:
        return int(1.0e9 + 6.0e10 * min(1.0, self._load(device, time.time()) * 1.5))

    def sample(self, device: Device) -> dict[str, Any]:
        now = time.time()
        load = self._load(device, now)
        jitter = self._random.uniform(-1.0, 1.0)
        return {
            "power_w": round(self._power(device, now) + jitter, 1),
            "energy_mj": int(self._advance(device, now)),
            "gpu_util": round(min(100.0, max(0.0, load * 100 + jitter)), 1) if load > 0 else 0.0,
            "mem_util": round(load * 45.0, 1),
            "mem_used_bytes": int(1.0e9 + 6.0e10 * min(1.0, load * 1.5)),
            "mem_total_bytes": SIMULATED_MEMORY,
            "sm_clock_mhz": 345 if load == 0 else 1980,
            "mem_clock_mhz": 2619,
            "temperature_c": round(33 + 35 * load),
            # 0x1 = GPU idle; a short SW power cap (0x4) at the top of the busy phase.
            "throttle_reasons": 1 if load == 0 else (4 if load > 0.99 else 0),
            "ecc_errors": 0,
            "xid_errors": 0,
        }

    def slow(self, device: Device) -> dict[str, Any]:
        load = self._load(device, time.time())
        return {
            "pcie_tx_kbps": int(200_000 * load),
            "pcie_rx_kbps": int(1_500_000 * load),
            "nvlink_active_links": [],
            "processes": [{"pid": 4242 + device.index, "name": "python", "used_memory_bytes": 60_000_000_000}]
            if load > 0
            else [],
            "retired_pages_dbe": 0,
        }

    def processes(self, device: Device) -> list[ProcessUse]:
        """Plausible holders, by GPU index modulo 4: a serving pod that holds its GPU even idle;
        two pods of two namespaces time-slicing one GPU (measured 2:1); a Slurm job; a bare
        process. All but the serving pod leave in the idle phase of the load cycle."""
        load = self._load(device, time.time())
        host = self.devices[0].uuid.rsplit("-", 1)[0] if self.devices else "sim"
        seed = zlib.crc32(host.encode()) % 10_000
        pid = 40_000 + device.index * 10
        kind = device.index % 4
        memory = int(1.0e9 + 6.0e10 * min(1.0, load * 1.5))
        if kind == 0:
            pod = f"{seed:04d}aaaa-0000-4000-8000-{device.index:012d}"
            return [ProcessUse(pid, memory, round(load * 95, 1), _sim_pod_cgroup(pod), "sim", "python3")]
        if load == 0:
            return []
        if kind == 1:
            first = f"{seed:04d}bbbb-0000-4000-8000-{device.index:012d}"
            second = f"{seed:04d}cccc-0000-4000-8000-{device.index:012d}"
            return [
                ProcessUse(pid, memory // 2, round(load * 60, 1), _sim_pod_cgroup(first), "sim", "python3"),
                ProcessUse(
                    pid + 1, memory // 3, round(load * 30, 1), _sim_pod_cgroup(second), "sim", "python3"
                ),
            ]
        if kind == 2:
            job = str(7000 + device.index)
            cgroup = f"0::/system.slice/slurmstepd.scope/uid_1000/job_{job}/step_0/user/task_0\n"
            return [ProcessUse(pid, memory, round(load * 90, 1), cgroup, "sim", "train.py")]
        return [
            ProcessUse(pid, memory, round(load * 80, 1), "0::/user.slice/user-1000.slice\n", "sim", "python")
        ]


def _sim_pod_cgroup(uid: str) -> str:
    pod = uid.replace("-", "_")
    return (
        f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{pod}.slice/"
        f"cri-containerd-{uid.replace('-', '')[:32]}{uid.replace('-', '')[:32]}.scope\n"
    )
