"""Agent configuration: command-line flags > environment variables > an INI file > defaults.

The INI file (``/etc/accelboard-agent.conf`` if present, or ``--config PATH``) has one section,
``[agent]``, with the keys of ``KEYS``. Every value is validated here, so a bad value anywhere is
one line naming the key and where it came from, and the command exits 2 before doing anything.
"""

from __future__ import annotations

import configparser
import os
import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlparse

DEFAULT_CONFIG_FILE = "/etc/accelboard-agent.conf"
DEFAULT_KUBELET_SOCKET = "unix:///var/lib/kubelet/pod-resources/kubelet.sock"
SECTION = "agent"


class ConfigError(Exception):
    """A configuration value is missing or malformed; the message names the key and its source."""


def _default_spool() -> str:
    # Root (the systemd unit) keeps the spool with other daemon state; a user run keeps it at home.
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return "/var/lib/accelboard-agent/spool.db"
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return str(Path(state) / "accelboard-agent" / "spool.db")


def _parse_url(value: str) -> str:
    parsed = urlparse(value)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ValueError(f"{value!r} is not an http(s) URL")
    return value.rstrip("/")


def _parse_positive_float(limit: float) -> Callable[[str], float]:
    def parse(value: str) -> float:
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"{value!r} is not a number") from None
        if not (0 < number <= limit):
            raise ValueError(f"{value!r} must be > 0 and <= {limit:g}")
        return number

    return parse


def _parse_positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"{value!r} is not an integer") from None
    if number <= 0:
        raise ValueError(f"{value!r} must be a positive integer")
    return number


def _parse_gpus(value: str) -> list[str]:
    items = [item.strip() for item in value.split(",") if item.strip()]
    for item in items:
        if not (item.isdigit() or item.startswith(("GPU-", "MIG-"))):
            raise ValueError(f"{item!r} is neither a GPU index nor a GPU-/MIG- UUID")
    return items


def _parse_text(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value.strip()


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _parse_bool(value: str) -> bool:
    if value.strip().lower() in _TRUE:
        return True
    if value.strip().lower() in _FALSE:
        return False
    raise ValueError(f"{value!r} is not on/off (true/false, yes/no, 1/0)")


def _parse_directory(value: str) -> str:
    path = _parse_text(value)
    if not os.path.isdir(path):
        raise ValueError(f"{path!r} is not a directory")
    return path


def _parse_unix_target(value: str) -> str:
    target = _parse_text(value)
    if not target.startswith("unix://") or len(target) <= len("unix://"):
        raise ValueError(f"{target!r} is not a unix:// socket address (unix:///var/lib/kubelet/...)")
    return target


def _parse_pods_url(value: str) -> str:
    url = _parse_url(value.strip())
    # The bare port (https://node:10250) means its pod list.
    return url + "/pods" if not urlparse(url).path else url


def _parse_file(value: str) -> str:
    path = _parse_text(value)
    if not os.path.isfile(path):
        raise ValueError(f"{path!r} is not a file")
    if not os.access(path, os.R_OK):
        raise ValueError(f"{path!r} cannot be read")
    return path


def _parse_ca_file(value: str) -> str:
    path = _parse_file(value)
    try:
        ssl.create_default_context(cafile=path)
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"{path!r} holds no PEM certificate ({exc})") from None
    return path


# A Kubernetes label key ([prefix/]name) or a shell-style glob of one (*, ?, [...]).
_LABEL_PATTERN = re.compile(r"^[A-Za-z0-9*?\[\]!]([A-Za-z0-9._/*?\[\]!-]*)$")


def _parse_label_patterns(value: str) -> list[str]:
    items = [item.strip() for item in value.split(",") if item.strip()]
    for item in items:
        if not _LABEL_PATTERN.match(item):
            raise ValueError(f"{item!r} is neither a label key nor a glob of one (app, app.kubernetes.io/*)")
    return items


# A Prometheus label name, as the inference API takes an interval's labels (at most 16, each name
# and value at most 63 characters).
_STATIC_LABEL = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


def _parse_static_labels(value: str) -> dict[str, str]:
    """``track=canary,version=v2``: the deployment labels a scrape's intervals carry."""
    labels: dict[str, str] = {}
    for item in (part.strip() for part in value.split(",")):
        if not item:
            continue
        name, equals, label_value = (text.strip() for text in item.partition("="))
        if not equals or not _STATIC_LABEL.match(name):
            raise ValueError(f"{item!r} is not name=value (a label name: letters, digits, _)")
        if not label_value or len(label_value) > 63 or not label_value.isprintable():
            raise ValueError(f"{item!r}: the value is 1 to 63 printable characters")
        labels[name] = label_value
    if len(labels) > 16:
        raise ValueError(f"{len(labels)} labels: at most 16")
    return labels


def _loopback(url: str) -> bool:
    host = urlparse(url).hostname or ""
    return host in ("localhost", "::1") or host.startswith("127.")


@dataclass(frozen=True)
class Key:
    name: str
    parse: Callable[[str], object]
    default: Callable[[], object]
    help: str


KEYS: dict[str, Key] = {
    key.name: key
    for key in (
        Key("server", _parse_url, lambda: "http://127.0.0.1:8000", "accelboard server base URL"),
        Key("token", _parse_text, lambda: "", "ingest token (Authorization: Bearer)"),
        Key("token_file", _parse_text, lambda: "", "file holding the token (for systemd credentials)"),
        Key("interval", _parse_positive_float(3600), lambda: 1.0, "sampling interval, seconds"),
        Key("spool", _parse_text, _default_spool, "path of the SQLite spool"),
        Key("gpus", _parse_gpus, lambda: [], "GPUs to sample: indices or UUIDs, comma-separated"),
        Key("hostname", _parse_text, lambda: "", "hostname to report (default: the system's)"),
        Key("send_interval", _parse_positive_float(3600), lambda: 5.0, "seconds between sends"),
        Key(
            "slow_interval", _parse_positive_float(86400), lambda: 30.0, "seconds between PCIe/process scans"
        ),
        Key("batch_max_samples", _parse_positive_int, lambda: 5000, "samples per telemetry batch"),
        Key("spool_max_samples", _parse_positive_int, lambda: 500_000, "raw samples kept before dropping"),
        Key("backoff_base", _parse_positive_float(3600), lambda: 1.0, "first retry delay, seconds"),
        Key("backoff_max", _parse_positive_float(86400), lambda: 300.0, "longest retry delay, seconds"),
        Key("timeout", _parse_positive_float(600), lambda: 10.0, "HTTP timeout, seconds"),
        # Attribution (docs/attribution.md): every source off by default.
        Key("attribution_nvml", _parse_bool, lambda: False, "NVML compute processes per GPU/MIG instance"),
        Key(
            "attribution_cgroups", _parse_bool, lambda: False, "a process's pod or Slurm job from its cgroup"
        ),
        Key("attribution_interval", _parse_positive_float(3600), lambda: 5.0, "seconds between observations"),
        Key(
            "attribution_cut_interval",
            _parse_positive_float(3600),
            lambda: 300.0,
            "seconds a holding runs before a batch sends its part so far",
        ),
        Key("procfs", _parse_directory, lambda: "/proc", "the procfs root to read processes under"),
        Key("kubelet", _parse_bool, lambda: False, "ask the kubelet's pod-resources API"),
        Key("kubelet_socket", _parse_unix_target, lambda: DEFAULT_KUBELET_SOCKET, "pod-resources socket"),
        Key("slurm_job_mapping_dir", _parse_directory, lambda: "", "dcgm-exporter's Slurm job-mapping dir"),
        Key("slurm_scontrol", _parse_text, lambda: "", "scontrol binary, for a job's user/account/partition"),
        Key("kubelet_pods_url", _parse_pods_url, lambda: "", "the kubelet's /pods, for pod names and labels"),
        Key("kubelet_token_file", _parse_file, lambda: "", "bearer token for kubelet_pods_url (re-read)"),
        Key("kubelet_ca_file", _parse_ca_file, lambda: "", "CA bundle verifying the kubelet's TLS"),
        Key("kubelet_insecure", _parse_bool, lambda: False, "do not verify the kubelet's TLS"),
        Key("pod_labels", _parse_label_patterns, lambda: [], "pod label keys or globs to send"),
        Key(
            "scrape_labels",
            _parse_static_labels,
            lambda: {},
            "deployment labels of the scraped engine's intervals (track=canary,version=v2)",
        ),
    )
}

ENV_PREFIX = "ACCELBOARD_"


@dataclass
class Config:
    server: str = "http://127.0.0.1:8000"
    token: str = ""
    interval: float = 1.0
    spool: str = ""
    gpus: list[str] = field(default_factory=list)
    hostname: str = ""
    send_interval: float = 5.0
    slow_interval: float = 30.0
    batch_max_samples: int = 5000
    spool_max_samples: int = 500_000
    backoff_base: float = 1.0
    backoff_max: float = 300.0
    timeout: float = 10.0
    attribution_nvml: bool = False
    attribution_cgroups: bool = False
    attribution_interval: float = 5.0
    attribution_cut_interval: float = 300.0
    procfs: str = "/proc"
    kubelet: bool = False
    kubelet_socket: str = DEFAULT_KUBELET_SOCKET
    slurm_job_mapping_dir: str = ""
    slurm_scontrol: str = ""
    kubelet_pods_url: str = ""
    kubelet_token_file: str = ""
    kubelet_ca_file: str = ""
    kubelet_insecure: bool = False
    pod_labels: list[str] = field(default_factory=list)
    scrape_labels: dict[str, str] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)


def _read_file(path: str, explicit: bool) -> dict[str, tuple[str, str]]:
    if not os.path.exists(path):
        if explicit:
            raise ConfigError(f"config: file {path} does not exist")
        return {}
    parser = configparser.ConfigParser(interpolation=None)
    try:
        with open(path, encoding="utf-8") as handle:
            parser.read_file(handle)
    except (OSError, configparser.Error) as exc:
        first_line = str(exc).splitlines()[0]
        raise ConfigError(f"config: cannot read {path}: {first_line}") from None
    for section in parser.sections():
        if section != SECTION:
            raise ConfigError(f"config: unknown section [{section}] in {path} (expected [{SECTION}])")
    values: dict[str, tuple[str, str]] = {}
    if parser.has_section(SECTION):
        for key, value in parser.items(SECTION):
            if key not in KEYS:
                raise ConfigError(f"{key}: unknown key in {path}")
            values[key] = (value, path)
    return values


def config_load(
    *,
    flags: Mapping[str, str | None],
    environ: Mapping[str, str] | None = None,
    config_path: str | None = None,
) -> Config:
    """Merge flags, environment and file into a validated ``Config``.

    ``flags`` maps key names to the raw string given on the command line (None when absent).
    Raises ``ConfigError`` naming the first bad key and its source.
    """
    environ = os.environ if environ is None else environ
    raw: dict[str, tuple[str, str]] = {}
    raw.update(_read_file(config_path or DEFAULT_CONFIG_FILE, explicit=config_path is not None))
    for name in KEYS:
        env_name = ENV_PREFIX + name.upper()
        if environ.get(env_name) not in (None, ""):
            raw[name] = (environ[env_name], env_name)
    for name, value in flags.items():
        if name not in KEYS:
            raise ConfigError(f"{name}: unknown key")
        if value is not None:
            raw[name] = (str(value), "--" + name.replace("_", "-"))
    parsed: dict[str, Any] = {}  # each key's value as its parser made it (Config's field types)
    sources: dict[str, str] = {}
    for name, key in KEYS.items():
        if name in raw:
            value, source = raw[name]
            try:
                parsed[name] = key.parse(value)
            except ValueError as exc:
                raise ConfigError(f"{name}: {exc} (from {source})") from None
            sources[name] = source
        else:
            parsed[name] = key.default()
            sources[name] = "default"
    token_file = str(parsed.pop("token_file"))
    if token_file and not parsed["token"]:
        try:
            parsed["token"] = Path(token_file).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ConfigError(f"token_file: cannot read {token_file}: {exc.strerror}") from None
        sources["token"] = "token_file"
    if float(parsed["backoff_max"]) < float(parsed["backoff_base"]):
        raise ConfigError(
            f"backoff_max: {parsed['backoff_max']} is below backoff_base {parsed['backoff_base']} "
            f"(from {sources['backoff_max']})"
        )
    if parsed["attribution_cgroups"] and not parsed["attribution_nvml"]:
        raise ConfigError(
            "attribution_cgroups: needs attribution_nvml on (the cgroups read are those of NVML's "
            f"processes) (from {sources['attribution_cgroups']})"
        )
    _kubelet_pods_check(parsed, sources)
    config = Config(**parsed)
    config.sources = sources
    return config


def _kubelet_pods_check(parsed: dict[str, Any], sources: dict[str, str]) -> None:
    """The pod list's keys make sense together (each refusal names the key that cannot stand)."""
    url = str(parsed["kubelet_pods_url"])

    def refuse(name: str, why: str) -> None:
        raise ConfigError(f"{name}: {why} (from {sources[name]})")

    for name in ("kubelet_token_file", "kubelet_ca_file", "kubelet_insecure", "pod_labels"):
        if parsed[name] and not url:
            refuse(name, "needs kubelet_pods_url (the kubelet's /pods)")
    if not url:
        return
    if not (parsed["kubelet"] or parsed["attribution_cgroups"]):
        refuse(
            "kubelet_pods_url",
            "names and labels the pods that kubelet (pod-resources) or attribution_cgroups finds; "
            "switch one on",
        )
    if url.startswith("http:"):
        if parsed["kubelet_token_file"] and not _loopback(url):
            refuse("kubelet_token_file", f"a token is sent over https only ({url} is http)")
        for name in ("kubelet_ca_file", "kubelet_insecure"):
            if parsed[name]:
                refuse(name, f"is for an https kubelet_pods_url ({url} is http)")
    if parsed["kubelet_insecure"] and parsed["kubelet_ca_file"]:
        refuse("kubelet_insecure", "verifies nothing; with kubelet_ca_file set, drop one of them")
