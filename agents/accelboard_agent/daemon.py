"""``accelboard-agent run``: the sampling daemon.

Three loops (four with attribution), so that no slow thing delays the 1 s tick:
1. the sampler (main thread) reads every GPU's hot signals each ``interval`` and appends them
   to the spool: local disk only, never the network;
2. the slow scanner (thread) reads PCIe/NVLink counters, processes, retired pages and remapped
   rows every ``slow_interval`` and folds them into the host facts;
3. the sender (thread) ships the spool (see ``sender``).
4. with an attribution source on, the attribution loop (thread) asks who holds each GPU and MIG
   instance every ``attribution_interval`` (NVML, /proc, the kubelet, Slurm: any may be slow)
   and folds the answer into the spool's open intervals (``intervals``).
SIGTERM/SIGINT set one event; every wait in the three loops wakes on it, so the daemon returns
within a second. Each tick is in the spool the moment it is read, so a stop (even SIGKILL)
loses at most the tick being read.
"""

from __future__ import annotations

import logging
import os
import platform
import signal
import socket
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import __version__
from .gpus import Backend, Device

if TYPE_CHECKING:
    from .attribution import Attributor
from .sender import Sender
from .spool import Spool

log = logging.getLogger("accelboard_agent.daemon")

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def energy_check(sample: dict[str, Any], previous_mj: int | None) -> bool:
    """Clean a sample's energy reading in place; return True when the counter started a new segment.

    A counter that reads 0 while power is drawn is broken (seen on some virtualised GPUs): it
    becomes NULL so the server integrates power instead of reporting 0 J. A counter below the
    previous reading means the driver reloaded: a new segment; the server never takes a negative
    delta, and neither does ``bench``.
    """
    energy = sample.get("energy_mj")
    power = sample.get("power_w")
    if energy == 0 and power:
        sample["energy_mj"] = None
        return False
    return energy is not None and previous_mj is not None and energy < previous_mj


def host_base_facts() -> dict[str, Any]:
    facts: dict[str, Any] = {
        "kernel": platform.release(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "machine": platform.machine(),
    }
    try:
        with open("/etc/os-release", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("PRETTY_NAME="):
                    facts["os"] = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        facts["os"] = platform.platform()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    facts["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return facts


class Agent:
    def __init__(
        self,
        *,
        backend: Backend | None,
        spool_path: str,
        hostname: str,
        interval: float,
        slow_interval: float,
        sender_options: dict[str, Any],
        spool_max_samples: int,
        no_gpu_reason: str = "",
        stop: threading.Event | None = None,
        attributor: Attributor | None = None,
        attribution_interval: float = 5.0,
    ) -> None:
        self.backend = backend
        self.devices: list[Device] = list(backend.devices) if backend else []
        self.spool_path = spool_path
        self.hostname = hostname or socket.gethostname()
        self.interval = interval
        self.slow_interval = slow_interval
        self.sender_options = sender_options
        self.spool_max_samples = spool_max_samples
        self.stop = stop or threading.Event()
        self._lock = threading.Lock()
        self._base_facts = host_base_facts()
        if no_gpu_reason:
            self._base_facts["no_gpu"] = no_gpu_reason
        if backend:
            self._base_facts.update(backend.facts())
        self._slow: dict[str, dict[str, Any]] = {}
        self._slow_at: float | None = None
        self._segments: dict[str, int] = {}
        self.ticks = 0
        self.attributor = attributor
        self.attribution_interval = attribution_interval

    # -- facts ---------------------------------------------------------------------------------
    def _publish_facts(self, spool: Spool) -> None:
        backend = self.backend
        with self._lock:
            facts = dict(self._base_facts)
            if self._slow:
                facts["gpus"] = {uuid: dict(values) for uuid, values in self._slow.items()}
                facts["gpus_read_at"] = self._slow_at
            if any(self._segments.values()):
                facts["energy_counter_resets"] = dict(self._segments)
        host = {
            "hostname": self.hostname,
            "agent_version": __version__,
            "driver_version": backend.driver_version if backend else "",
            "cuda_version": backend.cuda_version if backend else "",
            "simulated": bool(backend and backend.simulated),
            "facts": facts,
        }
        driver = backend.driver_version if backend else ""
        slices = self.attributor is not None
        accelerators = [device.accelerator(driver, slices=slices) for device in self.devices]
        if slices and backend is not None:
            # MIG instances are holdable devices of their own: the server needs them registered.
            for device in self.devices:
                accelerators += [item.accelerator(driver, slices=True) for item in backend.instances(device)]
        spool.facts_set(host=host, accelerators=accelerators)

    def attribution_loop(self) -> None:
        """Every ``attribution_interval``: who holds each device, into the spool's intervals."""
        assert self.attributor is not None and self.backend is not None
        spool = Spool(self.spool_path, max_samples=self.spool_max_samples)
        try:
            while not self.stop.is_set():
                started = time.monotonic()
                now = time.time()
                try:
                    holdings = self.attributor.observe(self.backend, self.devices)
                except Exception:  # one bad source must not end attribution for good
                    if not self.stop.is_set():
                        log.exception("attribution: reading who holds the GPUs failed")
                else:
                    spool.attribution_observe(at=round(now, 3), holdings=holdings)
                self._sleep_until(started + self.attribution_interval)
        finally:
            spool.close()

    # -- loops ---------------------------------------------------------------------------------
    def _sleep_until(self, deadline: float) -> None:
        while not self.stop.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            self.stop.wait(min(remaining, 0.2))

    def sample_loop(self, spool: Spool) -> None:
        previous: dict[str, int | None] = {}
        unsupported_seen = {device.uuid: len(device.unsupported) for device in self.devices}
        next_tick = time.monotonic()
        while not self.stop.is_set():
            now = time.time()
            samples = []
            assert self.backend is not None
            self.backend.tick()
            for device in self.devices:
                sample = self.backend.sample(device)
                if energy_check(sample, previous.get(device.uuid)):
                    with self._lock:
                        self._segments[device.uuid] = self._segments.get(device.uuid, 0) + 1
                    log.warning("energy counter of %s went down (driver reload?): new segment", device.uuid)
                if sample.get("energy_mj") is not None:
                    previous[device.uuid] = sample["energy_mj"]
                sample["time"] = round(now, 3)
                sample["gpu"] = device.uuid
                samples.append(sample)
            dropped = spool.samples_add(samples)
            if dropped:
                log.warning("spool full: dropped %d oldest raw samples", dropped)
            self.ticks += 1
            # A signal found unsupported on this tick changes the accelerators' capability lists.
            changed = any(len(d.unsupported) != unsupported_seen[d.uuid] for d in self.devices)
            if changed or self.ticks == 1:
                unsupported_seen = {d.uuid: len(d.unsupported) for d in self.devices}
                self._publish_facts(spool)
            next_tick += self.interval
            if next_tick < time.monotonic():
                # Fell behind (suspended host, stalled disk): skip missed ticks, keep the phase.
                missed = int((time.monotonic() - next_tick) / self.interval) + 1
                next_tick += missed * self.interval
            self._sleep_until(next_tick)

    def slow_loop(self) -> None:
        spool = Spool(self.spool_path, max_samples=self.spool_max_samples)
        try:
            while not self.stop.is_set():
                readings = {}
                for device in self.devices:
                    if self.stop.is_set():
                        break
                    assert self.backend is not None
                    readings[device.uuid] = self.backend.slow(device)
                with self._lock:
                    self._slow = readings
                    self._slow_at = round(time.time(), 3)
                self._publish_facts(spool)
                self._sleep_until(time.monotonic() + self.slow_interval)
        finally:
            spool.close()

    def send_loop(self) -> None:
        spool = Spool(self.spool_path, max_samples=self.spool_max_samples)
        try:
            Sender(spool=spool, hostname=self.hostname, stop=self.stop, **self.sender_options).run()
        finally:
            spool.close()

    def run(self) -> int:
        spool = Spool(self.spool_path, max_samples=self.spool_max_samples)
        spool.attribution_close_stale()
        self._publish_facts(spool)
        threads = [
            threading.Thread(target=self.send_loop, name="sender", daemon=True),
        ]
        if self.devices:
            threads.append(threading.Thread(target=self.slow_loop, name="slow", daemon=True))
        if self.devices and self.attributor is not None:
            threads.append(threading.Thread(target=self.attribution_loop, name="attribution", daemon=True))
        for thread in threads:
            thread.start()
        try:
            if self.devices:
                self.sample_loop(spool)
            else:
                while not self.stop.wait(0.5):
                    pass
        finally:
            self.stop.set()
            spool.close()
            # The sender may be inside an HTTP request; its batch is in the spool either way and
            # is resent (same batch_id) on the next start, so it is not waited for past a moment.
            deadline = time.monotonic() + 0.5
            for thread in threads:
                thread.join(max(0.0, deadline - time.monotonic()))
            if self.attributor is not None:
                self.attributor.close()
            if self.backend:
                self.backend.close()
        return 0


@dataclass
class SignalStop:
    """What ``install_signal_handlers`` changed, for ``restore_signal_handlers``."""

    previous: dict[int, Any]
    write_fd: int
    watcher: threading.Thread


def install_signal_handlers(stop: threading.Event, signals: tuple[int, ...] = STOP_SIGNALS) -> SignalStop:
    """SIGTERM/SIGINT set ``stop``, from a thread rather than from the handler itself.

    A Python signal handler runs in the main thread between two bytecodes, possibly while that
    thread holds the event's own lock inside ``Event.wait``; ``Event.set()`` there waits for that
    lock forever (once in CI: an agent never exited after SIGINT). So the handler takes no lock:
    it writes the signal number to a pipe, and a watcher thread reads it, logs and sets ``stop``.
    """
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)

    def handler(signum: int, frame: Any) -> None:
        try:
            os.write(write_fd, bytes([signum]))
        except OSError:  # the pipe is full of earlier signals: one of them stops already
            pass

    def watch() -> None:
        try:
            while data := os.read(read_fd, 64):
                log.info("signal %d: stopping", data[-1])
                stop.set()
        finally:
            os.close(read_fd)

    watcher = threading.Thread(target=watch, name="signals", daemon=True)
    watcher.start()
    previous = {sig: signal.signal(sig, handler) for sig in signals}
    return SignalStop(previous=previous, write_fd=write_fd, watcher=watcher)


def restore_signal_handlers(installed: SignalStop) -> None:
    for sig, handler in installed.previous.items():
        signal.signal(sig, handler)
    os.close(installed.write_fd)  # the watcher reads end-of-file and returns
    installed.watcher.join(1.0)
