"""NVML reading against a fake NVML: units, unsupported signals probed once, fallbacks, MIG, no driver."""

from __future__ import annotations

import pynvml
from conftest import FakeGpu  # this folder (no __init__.py): the root tests package must not shadow it

from accelboard_agent.daemon import energy_check
from accelboard_agent.gpus import NoGpu, nvml_open


def test_it_reads_every_hot_signal_in_api_units(fake_nvml):
    fake_nvml([FakeGpu(0, power_mw=412_500)])
    backend = nvml_open()
    device = backend.devices[0]

    sample = backend.sample(device)

    assert device.uuid == "GPU-fake-0000-aaaa"
    assert device.power_limit_w == 700.0
    assert backend.cuda_version == "12.4"
    assert sample["power_w"] == 412.5
    assert 5_000_000 <= sample["energy_mj"] < 5_000_000 + 412_500 * 60  # mJ since "driver load"
    assert sample["gpu_util"] == 97.0 and sample["mem_util"] == 41.0
    assert sample["mem_used_bytes"] == 61_203_283_968 and sample["mem_total_bytes"] == 85_520_809_984
    assert sample["sm_clock_mhz"] == 1980 and sample["temperature_c"] == 61
    assert sample["throttle_reasons"] == 4  # clocks-event reasons, the newer call
    assert sample["ecc_errors"] == 0 and sample["xid_errors"] == 0
    assert device.accelerator(backend.driver_version)["unsupported"] == []


def test_it_counts_xid_events_per_gpu_without_blocking(fake_nvml, caplog):
    first, second, third = (
        FakeGpu(0),
        FakeGpu(1),
        FakeGpu(2, errors={"nvmlDeviceRegisterEvents": pynvml.NVML_ERROR_NOT_SUPPORTED}),
    )
    fake = fake_nvml([first, second, third])
    backend = nvml_open()
    devices = backend.devices

    def tick() -> list[int | None]:  # as the sampler does: one drain, then every GPU
        backend.tick()
        return [backend.sample(d)["xid_errors"] for d in devices]

    assert tick() == [0, 0, None]
    fake.xid(second, 79)  # "GPU has fallen off the bus"
    fake.xid(second, 48)  # double-bit ECC
    fake.xid(first, 13)

    assert tick() == [1, 2, None]
    assert tick() == [1, 2, None]  # a count, not a rate
    fake.xid(first, 31)
    assert [backend.sample(d)["xid_errors"] for d in devices] == [1, 2, None]  # counted at the tick
    assert tick() == [2, 2, None]
    assert devices[2].accelerator("")["unsupported"] == ["xid"]
    assert {"XID 79 on GPU GPU-fake-0001-aaaa", "XID 13 on GPU GPU-fake-0000-aaaa"} <= {
        r.getMessage() for r in caplog.records
    }
    backend.close()


def test_it_probes_unsupported_signals_once_and_reports_them(fake_nvml):
    gpu = FakeGpu(
        0,
        instant_ret=pynvml.NVML_ERROR_NOT_SUPPORTED,
        errors={
            "nvmlDeviceGetTotalEnergyConsumption": pynvml.NVML_ERROR_NO_PERMISSION,
            "nvmlDeviceGetTotalEccErrors": pynvml.NVML_ERROR_NOT_SUPPORTED,
        },
    )
    fake_nvml([gpu])
    backend = nvml_open()
    device = backend.devices[0]

    samples = [backend.sample(device) for _ in range(5)]

    assert all(s["energy_mj"] is None and s["ecc_errors"] is None for s in samples)
    # Instant power missing: the 1 s average power is used instead, never NULL.
    assert all(s["power_w"] == 300.0 for s in samples)
    assert gpu.calls["nvmlDeviceGetTotalEnergyConsumption"] == 1
    assert gpu.calls["nvmlDeviceGetTotalEccErrors"] == 1
    assert gpu.calls["nvmlDeviceGetFieldValues"] == 1
    assert device.unsupported == {
        "power_instant": "not_supported",
        "energy": "no_permission",
        "ecc": "not_supported",
    }
    assert device.accelerator("")["unsupported"] == ["ecc", "energy", "power_instant"]


def test_it_treats_a_transient_error_as_null_and_asks_again(fake_nvml):
    gpu = FakeGpu(0, errors={"nvmlDeviceGetTemperature": pynvml.NVML_ERROR_UNKNOWN})
    fake_nvml([gpu])
    backend = nvml_open()
    device = backend.devices[0]

    first = backend.sample(device)
    del gpu.errors["nvmlDeviceGetTemperature"]
    second = backend.sample(device)

    assert first["temperature_c"] is None
    assert second["temperature_c"] == 61
    assert "temperature" not in device.unsupported
    assert backend.transient_errors == 1


def test_it_falls_back_to_throttle_reasons_on_older_drivers(fake_nvml, monkeypatch):
    gpu = FakeGpu(0, errors={"nvmlDeviceGetCurrentClocksEventReasons": pynvml.NVML_ERROR_FUNCTION_NOT_FOUND})
    fake_nvml([gpu])
    backend = nvml_open()
    device = backend.devices[0]

    values = [backend.sample(device)["throttle_reasons"] for _ in range(3)]

    assert values == [8, 8, 8]
    assert gpu.calls["nvmlDeviceGetCurrentClocksEventReasons"] == 1
    assert device.accelerator("")["unsupported"] == []  # the fallback works: nothing missing


def test_it_tolerates_an_old_pynvml_without_the_newer_function(fake_nvml, monkeypatch):
    fake_nvml([FakeGpu(0)])
    monkeypatch.delattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons")
    backend = nvml_open()

    assert backend.sample(backend.devices[0])["throttle_reasons"] == 8


def test_it_reports_mig_layout_and_marks_utilisation_unsupported(fake_nvml):
    fake_nvml([FakeGpu(0, mig=True), FakeGpu(1)])
    backend = nvml_open()
    mig_gpu, plain_gpu = backend.devices

    sample = backend.sample(mig_gpu)

    assert mig_gpu.mig_mode and not plain_gpu.mig_mode
    assert sample["gpu_util"] is None and sample["mem_util"] is None
    assert mig_gpu.unsupported["utilization"] == "mig"
    assert backend.facts() == {
        "mig": {mig_gpu.uuid: [{"uuid": "MIG-fake-0-0", "memory_bytes": 85_520_809_984}]}
    }


def test_it_says_no_driver_in_one_line(fake_nvml):
    fake_nvml([], init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)

    try:
        nvml_open()
    except NoGpu as exc:
        message = str(exc)
    else:
        raise AssertionError("expected NoGpu")

    assert message.startswith("no NVIDIA driver available (NVMLError_LibraryNotFound")
    assert "\n" not in message


def test_it_reads_slow_signals_off_the_hot_path(fake_nvml):
    gpu = FakeGpu(0, errors={"nvmlDeviceGetNvLinkState": pynvml.NVML_ERROR_NOT_SUPPORTED})
    fake_nvml([gpu])
    backend = nvml_open()
    device = backend.devices[0]

    backend.sample(device)
    slow = backend.slow(device)

    assert gpu.calls["nvmlDeviceGetPcieThroughput"] == 2  # tx and rx, only from slow()
    assert slow["pcie_tx_kbps"] == 1234 and slow["nvlink_active_links"] == []
    assert [(p["pid"], p["used_memory_bytes"]) for p in slow["processes"]] == [(1, 1024)]
    assert slow["remapped_rows"] == {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False}
    assert "nvlink" in device.unsupported


def test_it_never_reports_zero_joules_while_power_is_drawn():
    broken = {"energy_mj": 0, "power_w": 250.0}
    idle_reset = {"energy_mj": 0, "power_w": None}

    assert energy_check(broken, previous_mj=None) is False
    assert broken["energy_mj"] is None
    energy_check(idle_reset, previous_mj=None)
    assert idle_reset["energy_mj"] == 0


def test_it_starts_a_new_segment_when_the_counter_goes_down():
    assert energy_check({"energy_mj": 1_000, "power_w": 90.0}, previous_mj=9_000_000) is True
    assert energy_check({"energy_mj": 9_000_500, "power_w": 90.0}, previous_mj=9_000_000) is False


def test_it_sends_gpm_profiling_metrics_between_ticks_on_gpus_that_have_gpm(fake_nvml):
    hopper = FakeGpu(0)
    hopper.gpm = {
        pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL: 62.5,
        pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL: 31.25,
        pynvml.NVML_GPM_METRIC_SM_UTIL: 90.0,
    }
    ampere = FakeGpu(1)  # no GPM: skipped cleanly
    fake = fake_nvml([hopper, ampere])
    backend = nvml_open()
    h, a = backend.devices

    first = backend.sample(h)
    later = [backend.sample(h) for _ in range(3)]
    others = [backend.sample(a) for _ in range(3)]

    # The first tick has no earlier sample to measure from; then each tick its interval.
    assert "tensor_active" not in first
    for sample in later:
        assert (sample["tensor_active"], sample["dram_active"], sample["sm_active"]) == (62.5, 31.25, 90.0)
        assert "sm_occupancy" not in sample and "gr_engine_active" not in sample  # metrics NVML refused
    assert fake.gpm_intervals == [(1, 2), (2, 3), (3, 4)]
    assert len(fake.gpm_buffers) == 2  # two buffers, reused tick after tick
    # No GPM: no fields, asked once, not reported as an unsupported signal.
    assert all("tensor_active" not in s and "dram_active" not in s for s in others)
    assert ampere.calls["nvmlGpmQueryDeviceSupport"] == 1 and ampere.calls["nvmlGpmSampleGet"] == 0
    assert a.accelerator("")["unsupported"] == [] and h.accelerator("")["unsupported"] == []
    backend.close()
    assert all(buffer.freed for buffer in fake.gpm_buffers)


def test_a_failed_gpm_sample_drops_that_tick_only(fake_nvml):
    gpu = FakeGpu(0)
    gpu.gpm = {pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL: 40.0}
    fake_nvml([gpu])
    backend = nvml_open()
    device = backend.devices[0]
    backend.sample(device)
    gpu.errors["nvmlGpmSampleGet"] = pynvml.NVML_ERROR_UNKNOWN
    failed = backend.sample(device)
    del gpu.errors["nvmlGpmSampleGet"]
    primed = backend.sample(device)  # measures from here on
    after = backend.sample(device)
    assert "tensor_active" not in failed and "tensor_active" not in primed
    assert after["tensor_active"] == 40.0 and backend.transient_errors == 1


def test_an_old_pynvml_without_gpm_is_skipped_cleanly(fake_nvml, monkeypatch):
    gpu = FakeGpu(0)
    gpu.gpm = {pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL: 40.0}
    fake_nvml([gpu])
    monkeypatch.delattr(pynvml, "nvmlGpmQueryDeviceSupport")
    backend = nvml_open()
    samples = [backend.sample(backend.devices[0]) for _ in range(3)]
    assert all("tensor_active" not in s for s in samples) and samples[-1]["power_w"] == 300.0
