"""The ``accelboard-agent`` command line: run, bench, scrape, status, flush.

Exit statuses: 0 fine; 1 the work failed (``--require-gpu`` without a GPU, ``flush`` left rows
behind, a run the server rejected); 2 bad usage or configuration (one line naming the key);
``bench`` otherwise exits with its command's status.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from . import __version__
from .config import Config, ConfigError, config_load
from .gpus import NoGpu, SimulatedBackend, nvml_open

if TYPE_CHECKING:
    from .attribution import Attributor

PROG = "accelboard-agent"
# The server's vocabularies (docs/api-contract.md); checked here so a typo fails before a long
# benchmark runs rather than when its result is uploaded.
PRECISIONS = ("fp32", "bf16", "fp16", "fp8", "int8", "int4", "fp4")
SCENARIOS = (
    "offline",
    "server",
    "serving",
    "single-stream",
    "multi-stream",
    "interactive",
    "chat",
    "batch",
    "training",
)
ENGINES = ("vllm", "trtllm", "tgi", "triton", "other")
log = logging.getLogger("accelboard_agent")


class UsageError(Exception):
    pass


def _say(message: str) -> None:
    print(f"{PROG}: {message}", file=sys.stderr, flush=True)


def _config_flags(parser: argparse.ArgumentParser, *, sampling: bool) -> None:
    group = parser.add_argument_group("configuration (flags > ACCELBOARD_* env vars > config file)")
    group.add_argument(
        "--config", help="INI file with an [agent] section (default /etc/accelboard-agent.conf)"
    )
    group.add_argument("--server", help="server base URL (ACCELBOARD_SERVER)")
    group.add_argument("--token", help="ingest token (ACCELBOARD_TOKEN)")
    group.add_argument("--spool", help="spool file (ACCELBOARD_SPOOL)")
    group.add_argument("--hostname", help="hostname to report")
    group.add_argument("-v", "--verbose", action="store_true", help="log each send and retry")
    if sampling:
        group.add_argument("--gpus", help="GPU indices or UUIDs, comma-separated (ACCELBOARD_GPUS)")
        group.add_argument(
            "--simulate", type=int, metavar="N", default=0, help="use N simulated GPUs instead of NVML"
        )
        group.add_argument("--require-gpu", action="store_true", help="exit 1 when no GPU can be read")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="accelboard host agent")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True

    run = commands.add_parser("run", help="sample GPUs every interval and ship to the server")
    _config_flags(run, sampling=True)
    run.add_argument("--interval", help="sampling interval, s (ACCELBOARD_INTERVAL, default 1)")
    for flag, text in (
        ("--send-interval", "seconds between sends (default 5)"),
        ("--slow-interval", "seconds between PCIe/NVLink/process scans (default 30)"),
        ("--spool-max-samples", "raw samples kept before the oldest are dropped (default 500000)"),
        ("--batch-max-samples", "samples per telemetry batch (default 5000)"),
        ("--backoff-base", "first retry delay, s (default 1)"),
        ("--backoff-max", "longest retry delay, s (default 300)"),
        ("--attribution-nvml", "on/off: who holds each GPU from NVML's processes (default off)"),
        ("--attribution-cgroups", "on/off: a process's pod or Slurm job from its cgroup (default off)"),
        ("--attribution-interval", "seconds between attribution observations (default 5)"),
        (
            "--attribution-cut-interval",
            "seconds a GPU's holding runs before a batch sends its part so far (default 300)",
        ),
        ("--procfs", "procfs root (default /proc)"),
        ("--kubelet", "on/off: ask the kubelet's pod-resources API (default off)"),
        (
            "--kubelet-socket",
            "pod-resources socket (default unix:///var/lib/kubelet/pod-resources/kubelet.sock)",
        ),
        ("--slurm-job-mapping-dir", "dcgm-exporter's Slurm job-mapping directory (default: none)"),
        ("--slurm-scontrol", "scontrol binary, for a job's user/account/partition (default: none)"),
        ("--kubelet-pods-url", "the kubelet's /pods, for pod names and labels (https://NODE:10250/pods)"),
        ("--kubelet-token-file", "bearer token file for --kubelet-pods-url (read again when it changes)"),
        ("--kubelet-ca-file", "CA bundle that verifies the kubelet's TLS certificate"),
        ("--kubelet-insecure", "on/off: do not verify the kubelet's TLS certificate (default off)"),
        ("--pod-labels", "pod label keys or globs to send, comma-separated (default: none)"),
    ):
        run.add_argument(flag, help=text)

    bench = commands.add_parser("bench", help="run a benchmark command and upload it as a run")
    _config_flags(bench, sampling=True)
    bench.add_argument("--model", default="", help="model name (default: the command's name)")
    bench.add_argument("--variant", default="", help="variant name (default: the precision)")
    bench.add_argument(
        "--precision",
        choices=PRECISIONS,
        default=None,
        help="numeric precision (default fp32, noted in the run)",
    )
    bench.add_argument(
        "--scenario",
        choices=SCENARIOS,
        default="",
        help="workload scenario (none given: stored as not stated)",
    )
    bench.add_argument("--batch-size", type=int, default=None)
    bench.add_argument("--results", help="the tool's results file (no importer in this version)")
    bench.add_argument(
        "--profile",
        action="append",
        default=[],
        metavar="PATH",
        help="a profiler trace the command writes (a file, or a directory of per-rank *.pt.trace.json[.gz] "
        "files as tensorboard_trace_handler writes them): uploaded with the run (repeatable)",
    )
    bench.add_argument("bench_command", nargs=argparse.REMAINDER, metavar="-- CMD ...")

    scrape = commands.add_parser("scrape", help="ship a vLLM /metrics endpoint as inference metrics")
    _config_flags(scrape, sampling=False)
    scrape.add_argument("--url", default="http://127.0.0.1:8000/metrics", help="Prometheus endpoint")
    scrape.add_argument(
        "--interval", dest="scrape_interval", type=float, default=15.0, help="seconds (default 15)"
    )
    scrape.add_argument("--model", default="", help="model name (default: the model_name label)")
    scrape.add_argument("--variant", default="", help="variant name")
    scrape.add_argument("--engine", choices=ENGINES, default="vllm")
    scrape.add_argument("--gpus", help="UUIDs of the GPUs serving the model, comma-separated")
    scrape.add_argument(
        "--labels",
        dest="scrape_labels",
        metavar="NAME=VALUE,...",
        help="the deployment's labels on its intervals, what canary checks select by (track=canary)",
    )
    scrape.add_argument("--count", type=int, default=0, help="stop after N intervals (0: run until stopped)")

    status = commands.add_parser("status", help="spool size, pending batches, drops, last send, server")
    _config_flags(status, sampling=False)
    status.add_argument("--json", action="store_true", help="print JSON")

    flush = commands.add_parser("flush", help="send everything in the spool now")
    _config_flags(flush, sampling=False)
    return parser


def _load(args: argparse.Namespace, keys: Sequence[str]) -> Config:
    flags: dict[str, str | None] = {}
    for key in keys:
        value = getattr(args, key, None)
        flags[key] = None if value is None else str(value)
    return config_load(flags=flags, config_path=args.config)


def _sender_options(config: Config) -> dict[str, Any]:
    return {
        "server": config.server,
        "token": config.token,
        "batch_max_samples": config.batch_max_samples,
        "send_interval": config.send_interval,
        "backoff_base": config.backoff_base,
        "backoff_max": config.backoff_max,
        "timeout": config.timeout,
        "attribution_cut_interval": config.attribution_cut_interval,
    }


def _hostname(config: Config) -> str:
    return config.hostname or socket.gethostname()


def _open_backend(args: argparse.Namespace, hostname: str) -> tuple:
    """(backend or None, reason when None). Says "no GPU" once, in one line."""
    if args.simulate and args.simulate < 0:
        raise UsageError("simulate: must be >= 0")
    if args.simulate:
        return SimulatedBackend(args.simulate, hostname=hostname), ""
    try:
        return nvml_open(), ""
    except NoGpu as exc:
        reason = str(exc)
        _say(f"{reason}; continuing without GPU telemetry")
        return None, reason


def _check_token(config: Config) -> None:
    if not config.token:
        raise ConfigError("token: not set (use --token, ACCELBOARD_TOKEN or token= in the config file)")


# -- commands ---------------------------------------------------------------------------------


def cmd_run(args: argparse.Namespace) -> int:
    from .daemon import install_signal_handlers, restore_signal_handlers

    keys = [
        "server", "token", "spool", "hostname", "gpus", "interval", "send_interval", "slow_interval",
        "spool_max_samples", "batch_max_samples", "backoff_base", "backoff_max",
        "attribution_nvml", "attribution_cgroups", "attribution_interval", "attribution_cut_interval",
        "procfs", "kubelet", "kubelet_socket", "slurm_job_mapping_dir", "slurm_scontrol",
        "kubelet_pods_url", "kubelet_token_file", "kubelet_ca_file", "kubelet_insecure", "pod_labels",
    ]  # fmt: skip
    config = _load(args, keys)
    _check_token(config)
    hostname = _hostname(config)
    stop = threading.Event()
    installed = install_signal_handlers(stop)
    try:
        return _run_agent(args, config, hostname, stop)
    finally:
        restore_signal_handlers(installed)


def _run_agent(args: argparse.Namespace, config: Config, hostname: str, stop: threading.Event) -> int:
    from .daemon import Agent

    backend, reason = _open_backend(args, hostname)
    if backend is None and args.require_gpu:
        return 1
    if backend is not None and config.gpus:
        from .bench import SelectionError, gpus_select

        try:
            backend.devices = gpus_select(backend.devices, config.gpus, mig=backend.facts().get("mig"))
        except SelectionError as exc:
            raise UsageError(str(exc)) from None
    attributor = _attributor(config)
    agent = Agent(
        backend=backend,
        attributor=attributor,
        attribution_interval=config.attribution_interval,
        spool_path=config.spool,
        hostname=hostname,
        interval=config.interval,
        slow_interval=config.slow_interval,
        sender_options=_sender_options(config),
        spool_max_samples=config.spool_max_samples,
        no_gpu_reason=reason,
        stop=stop,
    )
    log.info("sampling %d GPUs every %.3g s into %s", len(agent.devices), config.interval, config.spool)
    return agent.run()


def _attributor(config: Config) -> Attributor | None:
    """The attribution sources the configuration switches on; None when none is."""
    if not (config.attribution_nvml or config.kubelet or config.slurm_job_mapping_dir):
        return None
    from .attribution import Attributor, Sources
    from .podresources import KubeletError

    sources = Sources(
        nvml=config.attribution_nvml,
        cgroups=config.attribution_cgroups,
        procfs=config.procfs,
        kubelet_socket=config.kubelet_socket if config.kubelet else "",
        slurm_job_mapping_dir=config.slurm_job_mapping_dir,
        slurm_scontrol=config.slurm_scontrol,
        timeout=min(config.timeout, 5.0),
        kubelet_pods_url=config.kubelet_pods_url,
        kubelet_token_file=config.kubelet_token_file,
        kubelet_ca_file=config.kubelet_ca_file,
        kubelet_insecure=config.kubelet_insecure,
        pod_labels=tuple(config.pod_labels),
    )
    try:
        return Attributor(sources)
    except KubeletError as exc:
        raise ConfigError(str(exc)) from None


def _bench_gpus(config: Config) -> list[str]:
    if config.gpus:
        return list(config.gpus)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return []
    items = [item.strip() for item in visible.split(",") if item.strip()]
    if (
        items
        and all(item.isdigit() for item in items)
        and os.environ.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID"
    ):
        # CUDA numbers GPUs fastest-first, NVML in PCI order: indices only agree on uniform hosts.
        _say(
            "CUDA_VISIBLE_DEVICES holds indices; mapping them in PCI order (set CUDA_DEVICE_ORDER=PCI_BUS_ID or use UUIDs)"
        )
    return items


TRACE_SUFFIXES = (".json", ".json.gz", ".csv")


def _profile_files(paths: list[str], *, since: float) -> list[str]:
    """The trace files behind ``--profile``: a file as given, or a directory's trace files that
    the command wrote (modified since it started). A path the command did not write is said, not fatal."""
    found: list[str] = []
    for path in paths:
        if os.path.isdir(path):
            names = sorted(
                os.path.join(path, name)
                for name in os.listdir(path)
                if name.endswith(TRACE_SUFFIXES) and os.path.getmtime(os.path.join(path, name)) >= since - 1
            )
            if not names:
                _say(f"profile: no trace written under {path}; the run is uploaded without one")
            found += [os.path.abspath(name) for name in names]
        elif os.path.isfile(path):
            found.append(os.path.abspath(path))
        else:
            _say(f"profile: {path} was not written by the command; the run is uploaded without it")
    return found


def cmd_bench(args: argparse.Namespace) -> int:
    from .bench import RESULT_IMPORTERS, SelectionError, bench_execute, gpus_select, run_payload
    from .sender import Sender
    from .spool import PROFILE, RUN, Spool

    command = list(args.bench_command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UsageError("bench: no command given (accelboard-agent bench [options] -- CMD ...)")
    if args.results is not None and not RESULT_IMPORTERS:
        raise UsageError(
            f"results: no importer available in this agent version ({__version__}); "
            "upload the file with the server's importer instead"
        )
    if args.batch_size is not None and args.batch_size <= 0:
        raise UsageError("batch-size: must be a positive integer")
    config = _load(args, ["server", "token", "spool", "hostname", "gpus"])
    _check_token(config)
    hostname = _hostname(config)
    backend, _reason = _open_backend(args, hostname)
    if backend is None and args.require_gpu:
        return 1
    devices = []
    if backend is not None:
        try:
            mig = backend.facts().get("mig")
            devices = gpus_select(backend.devices, _bench_gpus(config), mig=mig)
        except SelectionError as exc:
            raise UsageError(str(exc)) from None
    started = time.time()
    try:
        measured = bench_execute(command=command, backend=backend, devices=devices)
    except SelectionError as exc:
        raise UsageError(str(exc)) from None
    finally:
        if backend is not None:
            backend.close()
    payload = run_payload(
        measured=measured,
        command=command,
        devices=devices,
        backend=backend,
        hostname=hostname,
        model=args.model,
        variant=args.variant,
        precision=args.precision or "fp32",
        scenario=args.scenario,
        batch_size=args.batch_size,
    )
    if args.precision is None:
        payload["context"]["precision_defaulted"] = True
    spool = Spool(config.spool, max_samples=config.spool_max_samples)
    traces = _profile_files(args.profile, since=started)
    profile_id = f"{payload['run_id']}:profile"
    try:
        spool.outbox_add(client_id=payload["run_id"], kind=RUN, payload=payload)
        if traces:
            spool.outbox_add(
                client_id=profile_id, kind=PROFILE, payload={"run_id": payload["run_id"], "files": traces}
            )
        sender = Sender(spool=spool, hostname=hostname, **_sender_options(config))
        outcome = sender.send_client(payload["run_id"])
        profile_outcome = sender.send_client(profile_id) if traces and outcome == "sent" else ""
    finally:
        spool.close()
    summary = {m["name"]: m["value"] for m in payload["metrics"]}
    if "energy_disagreement" in measured:
        flag = " (FLAGGED: over 5%)" if measured["energy_disagreement_flag"] else ""
        _say(
            f"energy: counter {measured['energy_counter_j']:.1f} J, integrated power "
            f"{measured['energy_integrated_j']:.1f} J, disagreement {measured['energy_disagreement']:.2%}{flag}"
        )
    _say(f"run {payload['run_id']}: exit {measured['exit_status']}, {json.dumps(summary)}")
    if profile_outcome == "sent":
        _say(f"profile uploaded ({len(traces)} file(s))")
    elif profile_outcome == "rejected":
        _say("the server rejected the profile (see the log line above)")
    if outcome == "sent":
        _say("run uploaded")
    elif outcome == "rejected":
        _say("the server rejected the run (see the log line above); it was not stored")
        return measured["exit_status"] or 1
    else:
        _say("server unreachable: the run is in the spool; `accelboard-agent flush` or the daemon sends it")
    return measured["exit_status"]


def _fetch(url: str, timeout: float) -> str:
    request = urllib.request.Request(
        url, headers={"Accept": "text/plain", "User-Agent": f"{PROG}/{__version__}"}
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return response.read().decode("utf-8", "replace")


def cmd_scrape(args: argparse.Namespace) -> int:
    from .daemon import install_signal_handlers, restore_signal_handlers
    from .prometheus import interval_build, parse_exposition, snapshot_delta, vllm_snapshot
    from .sender import Sender
    from .spool import INFERENCE, Spool

    if args.scrape_interval <= 0:
        raise UsageError("interval: must be > 0")
    config = _load(args, ["server", "token", "spool", "hostname", "scrape_labels"])
    _check_token(config)
    hostname = _hostname(config)
    gpus = [item.strip() for item in (args.gpus or "").split(",") if item.strip()]
    stop = threading.Event()
    installed = install_signal_handlers(stop)
    spool = Spool(config.spool, max_samples=config.spool_max_samples)
    options = _sender_options(config)
    options["send_interval"] = min(config.send_interval, args.scrape_interval)
    sender_spool = Spool(config.spool, max_samples=config.spool_max_samples)
    sender = Sender(spool=sender_spool, hostname=hostname, stop=stop, **options)
    thread = threading.Thread(target=sender.run, name="sender", daemon=True)
    thread.start()
    previous: dict[str, Any] = {}
    previous_at: float | None = None
    shipped = 0
    failures = 0
    try:
        next_at = time.monotonic()
        while not stop.is_set():
            now = time.time()
            try:
                snapshots = vllm_snapshot(
                    parse_exposition(_fetch(args.url, config.timeout)), model=args.model
                )
            except (OSError, ValueError) as exc:
                failures += 1
                if failures == 1 or failures % 20 == 0:
                    _say(f"cannot read {args.url}: {exc}")
                snapshots = None
            if snapshots is not None:
                failures = 0
                if previous_at is not None:
                    intervals = [
                        interval_build(
                            model=model,
                            variant=args.variant,
                            delta=snapshot_delta(previous.get(model), snapshot),
                            start=previous_at,
                            seconds=now - previous_at,
                            accelerator_uuids=gpus,
                            engine=args.engine,
                            labels=config.scrape_labels,
                        )
                        for model, snapshot in sorted(snapshots.items())
                    ]
                    if intervals:
                        # At most 64 characters, the API's limit for inference batch ids.
                        batch_id = f"{hostname[:32]}:{args.engine}:{spool.spool_id}:{int(now * 1000)}"
                        spool.outbox_add(
                            client_id=batch_id,
                            kind=INFERENCE,
                            payload={"batch_id": batch_id, "host": hostname, "intervals": intervals},
                            items=len(intervals),
                        )
                    shipped += 1
                    if args.count and shipped >= args.count:
                        break
                previous, previous_at = snapshots, now
            next_at += args.scrape_interval
            while not stop.is_set() and time.monotonic() < next_at:
                stop.wait(min(0.2, max(0.0, next_at - time.monotonic())))
    finally:
        stop.set()
        thread.join(1.0)
        # One last prompt attempt, so a bounded scrape (--count) ships what it read.
        Sender(spool=spool, hostname=hostname, **_sender_options(config)).send_once()
        spool.close()
        sender_spool.close()
        restore_signal_handlers(installed)
    return 0


def _reachable(server: str, timeout: float = 3.0) -> str:
    try:
        with urllib.request.urlopen(server + "/healthz", timeout=timeout) as response:
            return f"yes (HTTP {response.status})"
    except urllib.error.HTTPError as exc:
        return f"yes (HTTP {exc.code})"
    except OSError as exc:
        return f"no ({getattr(exc, 'reason', exc)})"


def cmd_status(args: argparse.Namespace) -> int:
    from .spool import Spool

    config = _load(args, ["server", "token", "spool", "hostname"])
    spool = Spool(config.spool, max_samples=config.spool_max_samples)
    try:
        status = spool.status()
    finally:
        spool.close()
    status["server"] = config.server
    status["server_reachable"] = _reachable(config.server)
    if args.json:
        print(json.dumps(status, indent=2, sort_keys=True))
        return 0
    last = status["last_success"]
    print(f"spool:              {status['spool']} ({status['spool_bytes'] / 1e6:.2f} MB)")
    print(f"raw samples:        {status['raw_samples']}")
    print(f"pending batches:    {status['pending_batches']} {status['pending_by_kind'] or ''}".rstrip())
    print(f"dropped samples:    {status['dropped_samples']} (spool cap)")
    print(f"rejected batches:   {status['rejected_batches']} ({status['rejected_items']} items)")
    print(f"sent:               {status['sent_batches']} batches, {status['sent_items']} items")
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(last)) if last else "never"
    print(f"last success:       {when}")
    if status["last_error"]:
        print(f"last error:         {status['last_error']}")
    print(f"server:             {status['server']} reachable: {status['server_reachable']}")
    return 0


def cmd_flush(args: argparse.Namespace) -> int:
    from .sender import Sender
    from .spool import Spool

    config = _load(args, ["server", "token", "spool", "hostname"])
    _check_token(config)
    spool = Spool(config.spool, max_samples=config.spool_max_samples)
    try:
        spool.outbox_retry_now()
        sender = Sender(spool=spool, hostname=_hostname(config), **_sender_options(config))
        totals = {"sent": 0, "rejected": 0, "retry": 0}
        while True:
            counts = sender.send_once(everything=True)
            for key, value in counts.items():
                totals[key] += value
            if counts["retry"] or not (counts["sent"] or counts["rejected"]):
                break
        left = spool.outbox_pending() + spool.samples_count()
    finally:
        spool.close()
    print(f"sent {totals['sent']} batches, rejected {totals['rejected']}, {left} rows left in the spool")
    return 0 if left == 0 else 1


COMMANDS = {
    "run": cmd_run,
    "bench": cmd_bench,
    "scrape": cmd_scrape,
    "status": cmd_status,
    "flush": cmd_flush,
}


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if getattr(args, "verbose", False) else logging.WARNING,
        format=f"{PROG}: %(levelname)s %(message)s",
    )
    try:
        return COMMANDS[args.command](args)
    except (ConfigError, UsageError) as exc:
        _say(str(exc))
        return 2


if __name__ == "__main__":
    sys.exit(main())
