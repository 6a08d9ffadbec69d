"""The deployment files agree with the code: compose validates, every setting is documented,
``check --deploy`` is clean in production mode, and the Makefile does what the README says."""

from __future__ import annotations

import ast
import os
import re
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SERVICES = {"postgres", "redis", "migrate", "web", "worker", "worker-scheduled", "worker-rollups", "beat"}
OPTIONAL = {"prometheus", "dcgm-exporter"}  # docker compose --profile prometheus --profile dcgm


def compose_client() -> list[str] | None:
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0:
        return [docker, "compose"]
    legacy = shutil.which("docker-compose")
    return [legacy] if legacy else None


def settings_env_names() -> set[str]:
    """Every NAME in ``env_*("NAME", ...)`` calls of settings.py, read from its syntax tree."""
    tree = ast.parse((ROOT / "accelboard" / "settings.py").read_text())
    names = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id.startswith("env_")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            names.add(node.args[0].value)
    return names


def env_example_names() -> set[str]:
    text = (ROOT / ".env.example").read_text()
    # Set (NAME=value) or documented with its default (# NAME=value).
    return set(re.findall(r"^#?\s*([A-Z][A-Z0-9_]*)=", text, flags=re.MULTILINE))


def production_env(**overrides: str) -> dict[str, str]:
    # The browser tests' DJANGO_ALLOW_ASYNC_UNSAFE is a test-process setting, never a deployment's.
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DATABASE_URL", "CELERY_", "EMAIL_")) and k != "DJANGO_ALLOW_ASYNC_UNSAFE"
    }
    env.update(
        {
            "ACCELBOARD_PRODUCTION": "1",
            "SECRET_KEY": secrets.token_urlsafe(60),
            # check --deploy opens no connection; the URL only has to be well-formed.
            "DATABASE_URL": "postgresql://accelboard:secret@db.example.com:5432/accelboard",
            "CELERY_BROKER_URL": "redis://redis.example.com:6379/0",
            "ALLOWED_HOSTS": "accelboard.example.com",
            "EMAIL_HOST": "smtp.example.com",
            # Alert emails link to SITE_URL and come from DEFAULT_FROM_EMAIL (deploy checks E005, E006).
            "SITE_URL": "https://accelboard.example.com",
            "DEFAULT_FROM_EMAIL": "accelboard <alerts@example.com>",
            "DJANGO_SETTINGS_MODULE": "accelboard.settings",
        }
    )
    env.pop("DEBUG", None)
    env.update(overrides)
    return env


def test_it_validates_the_compose_file_with_the_example_env(tmp_path: Path) -> None:
    client = compose_client()
    if client is None:
        pytest.skip(
            "no docker compose client (neither `docker compose` nor `docker-compose`) on this machine"
        )
    # env_file: .env must exist; the committed example stands in for the operator's copy.
    shutil.copy(ROOT / "docker-compose.yml", tmp_path / "docker-compose.yml")
    shutil.copy(ROOT / ".env.example", tmp_path / ".env")
    command = [*client, "--project-directory", str(tmp_path), "-f", str(tmp_path / "docker-compose.yml")]
    checked = subprocess.run([*command, "config", "-q"], capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stderr
    services = subprocess.run([*command, "config", "--services"], capture_output=True, text=True, timeout=60)
    # Compose v2 leaves services of profiles not asked for out of the list; docker-compose 1.x lists
    # them all (and starts them only when their profile is asked for: the profiles test below).
    assert set(services.stdout.split()) - OPTIONAL == SERVICES


def test_it_validates_the_optional_prometheus_and_dcgm_profiles(tmp_path: Path) -> None:
    client = compose_client()
    if client is None:
        pytest.skip("no docker compose client on this machine")
    shutil.copy(ROOT / "docker-compose.yml", tmp_path / "docker-compose.yml")
    shutil.copy(ROOT / ".env.example", tmp_path / ".env")
    (tmp_path / "deploy" / "prometheus").mkdir(parents=True)
    shutil.copy(ROOT / PROMETHEUS_CONFIG, tmp_path / PROMETHEUS_CONFIG)
    command = [*client, "--project-directory", str(tmp_path), "-f", str(tmp_path / "docker-compose.yml")]
    profiles = ["--profile", "prometheus", "--profile", "dcgm"]
    checked = subprocess.run(
        [*command, *profiles, "config", "-q"], capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0, checked.stderr
    services = subprocess.run(
        [*command, *profiles, "config", "--services"], capture_output=True, text=True, timeout=60
    )
    assert set(services.stdout.split()) == SERVICES | OPTIONAL


PROMETHEUS_CONFIG = "deploy/prometheus/prometheus.yml"


def test_the_prometheus_profile_remote_writes_to_web_with_a_token_file_only_what_accelboard_reads() -> None:
    import yaml

    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    prometheus, dcgm = compose["services"]["prometheus"], compose["services"]["dcgm-exporter"]
    assert prometheus["profiles"] == ["prometheus"] and dcgm["profiles"] == ["dcgm"]
    assert f"./{PROMETHEUS_CONFIG}:/etc/prometheus/prometheus.yml:ro" in prometheus["volumes"]
    # The token comes from the environment into a file, never into the config or the image.
    assert prometheus["environment"] == {"ACCELBOARD_PROMETHEUS_TOKEN": "${ACCELBOARD_PROMETHEUS_TOKEN:-}"}
    assert "ACCELBOARD_PROMETHEUS_TOKEN" in env_example_names()
    assert dcgm["deploy"]["resources"]["reservations"]["devices"][0]["capabilities"] == ["gpu"]

    config = yaml.safe_load((ROOT / PROMETHEUS_CONFIG).read_text())
    (write,) = config["remote_write"]
    assert write["url"] == "http://web:8000/api/v1/prometheus/write"
    token_file = write["authorization"]["credentials_file"]
    assert token_file in prometheus["command"][0]
    (keep,) = write["write_relabel_configs"]
    assert keep["action"] == "keep" and keep["source_labels"] == ["__name__"]
    pattern = re.compile(f"^(?:{keep['regex']})$")  # Prometheus anchors relabel regexes
    for kept in ("DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "vllm:prompt_tokens_total",
                 "nv_inference_request_success"):  # fmt: skip
        assert pattern.match(kept), kept
    for dropped in ("up", "go_goroutines", "scrape_duration_seconds"):
        assert not pattern.match(dropped), dropped
    assert write["queue_config"]["max_samples_per_send"] >= 2000
    targets = [t for job in config["scrape_configs"] for c in job["static_configs"] for t in c["targets"]]
    assert "dcgm-exporter:9400" in targets


@pytest.mark.skipif(
    shutil.which("promtool") is None, reason="promtool (Debian's prometheus package) is not installed"
)
def test_promtool_accepts_the_prometheus_config(tmp_path: Path) -> None:
    config = (
        (ROOT / PROMETHEUS_CONFIG)
        .read_text()
        .replace("/prometheus/accelboard-token", str(tmp_path / "token"))
    )
    (tmp_path / "token").write_text("t")
    (tmp_path / "prometheus.yml").write_text(config)
    checked = subprocess.run(
        ["promtool", "check", "config", str(tmp_path / "prometheus.yml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_it_names_every_variable_the_settings_read_in_env_example() -> None:
    read = settings_env_names()
    assert {"SECRET_KEY", "DATABASE_URL", "CELERY_BROKER_URL", "ALLOWED_HOSTS", "EMAIL_HOST"} <= read
    missing = sorted(read - env_example_names())
    assert missing == [], f".env.example does not mention {missing}"


def test_it_documents_the_beat_overrides_in_env_example() -> None:
    from accelboard.celery import BEAT_ENTRIES

    documented = env_example_names()
    names = {"ACCELBOARD_BEAT_" + name.upper().replace("-", "_") for name in BEAT_ENTRIES}
    assert names, "the beat schedule has entries"
    # One example is enough to show the pattern; each must at least be a real entry.
    shown = {name for name in documented if name.startswith("ACCELBOARD_BEAT_")}
    assert shown and shown <= names, f"{sorted(shown - names)} are not beat entries"


def test_it_passes_check_deploy_in_production_mode() -> None:
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=production_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_it_refuses_production_without_a_secret_key() -> None:
    env = production_env()
    env.pop("SECRET_KEY")
    # `check` reports it with any other problem; anything else (here the compose file's migrate
    # service) stops at start-up naming it.
    result = subprocess.run(
        [sys.executable, "-m", "accelboard.cli", "check"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert result.returncode == 1
    assert "(accelboard.E007) SECRET_KEY must be set" in result.stderr
    result = subprocess.run(
        [sys.executable, "-m", "accelboard.cli", "migrate"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert result.returncode == 2
    assert "configuration error: SECRET_KEY must be set" in result.stderr


def test_it_rejects_the_empty_secret_key_of_env_example() -> None:
    # The example's SECRET_KEY is left empty so a copied .env cannot start with a known key.
    example = dict(re.findall(r"^([A-Z][A-Z0-9_]*)=(.*)$", (ROOT / ".env.example").read_text(), re.MULTILINE))
    assert example["SECRET_KEY"] == ""
    result = subprocess.run(
        [sys.executable, "-m", "accelboard.cli", "check"],
        cwd=ROOT,
        env=production_env(SECRET_KEY=example["SECRET_KEY"]),
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert "SECRET_KEY" in result.stderr


def make_dry_run(*args: str) -> str:
    result = subprocess.run(
        ["make", "-n", "--no-print-directory", *args], cwd=ROOT, capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_it_has_the_make_targets_the_readme_uses() -> None:
    assert ".venv/bin/accelboard demo --port 8001" in make_dry_run("demo", "ARGS=--port 8001")
    assert ".venv/bin/python -m pytest" in make_dry_run("test")
    lint = make_dry_run("lint")
    assert "ruff check" in lint and "makemigrations --check" in lint


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_it_refuses_a_python_older_than_3_11(tmp_path: Path) -> None:
    # A stand-in interpreter that reports 3.10: the Makefile must stop before creating a venv.
    old = tmp_path / "python3.10"
    old.write_text(
        "#!/bin/sh\n"
        'case "$2" in *version_info*) exit 1 ;; *python_version*) echo 3.10.14 ;; *) exit 3 ;; esac\n'
    )
    old.chmod(0o755)
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    result = subprocess.run(
        ["make", "demo", f"PYTHON={old}"], cwd=tmp_path, capture_output=True, text=True, timeout=30
    )
    assert result.returncode != 0
    assert "needs Python >= 3.11" in result.stderr and "3.10.14" in result.stderr
    assert not (tmp_path / ".venv").exists()


def test_it_copies_into_the_image_only_what_exists_and_is_not_ignored() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    ignored = [
        line.strip().rstrip("/")
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith(("#", "!"))
    ]
    sources = []
    for line in dockerfile.splitlines():
        if line.startswith("COPY ") and "--from" not in line:
            sources.extend(line.split()[1:-1])
    assert sources, "the Dockerfile copies the project in"
    for source in sources:
        assert (ROOT / source).exists(), f"Dockerfile copies {source}, which is not in the repository"
        assert source not in ignored, f"Dockerfile copies {source}, which .dockerignore leaves out"
    assert re.search(r"^USER (?!root)\S+", dockerfile, re.MULTILINE), "the image must not run as root"
    assert "HEALTHCHECK" in dockerfile and "/healthz" in dockerfile
