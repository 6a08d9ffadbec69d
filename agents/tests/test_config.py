"""Configuration: flags > env > INI file > defaults, and one-line errors naming the key (exit 2)."""

from __future__ import annotations

import os

import pytest

from accelboard_agent.cli import main
from accelboard_agent.config import ConfigError, config_load


def _file(tmp_path, text: str) -> str:
    path = tmp_path / "agent.conf"
    path.write_text(text)
    return str(path)


def test_it_prefers_flags_over_env_over_file(tmp_path):
    path = _file(
        tmp_path, "[agent]\nserver = http://file:8000\ninterval = 5\ntoken = from-file\ngpus = 0,1\n"
    )
    environ = {"ACCELBOARD_INTERVAL": "2", "ACCELBOARD_TOKEN": "from-env"}

    config = config_load(flags={"interval": "0.5", "server": None}, environ=environ, config_path=path)

    assert config.interval == 0.5
    assert config.sources["interval"] == "--interval"
    assert config.token == "from-env"
    assert config.server == "http://file:8000"
    assert config.gpus == ["0", "1"]
    assert config.send_interval == 5.0  # default


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"ACCELBOARD_INTERVAL": "fast"}, "interval: 'fast' is not a number (from ACCELBOARD_INTERVAL)"),
        ({"ACCELBOARD_INTERVAL": "0"}, "interval: '0' must be > 0"),
        (
            {"ACCELBOARD_SERVER": "ftp://x"},
            "server: 'ftp://x' is not an http(s) URL (from ACCELBOARD_SERVER)",
        ),
        ({"ACCELBOARD_GPUS": "0,card1"}, "gpus: 'card1' is neither a GPU index nor a GPU-/MIG- UUID"),
        ({"ACCELBOARD_SCRAPE_LABELS": "track"}, "scrape_labels: 'track' is not name=value"),
        ({"ACCELBOARD_SCRAPE_LABELS": "app.kubernetes.io/version=2"}, "scrape_labels: 'app.kubernetes.io"),
        ({"ACCELBOARD_SCRAPE_LABELS": "track="}, "scrape_labels: 'track=': the value is 1 to 63"),
    ],
)
def test_it_rejects_bad_values_naming_the_key_and_source(environ, message):
    with pytest.raises(ConfigError) as error:
        config_load(flags={}, environ=environ, config_path=None)

    assert message in str(error.value)


def test_scrape_labels_read_from_the_file(tmp_path):
    path = _file(tmp_path, "[agent]\nscrape_labels = track=canary, version = v2\n")

    config = config_load(flags={}, environ={}, config_path=path)

    assert config.scrape_labels == {"track": "canary", "version": "v2"}
    assert config_load(flags={}, environ={}, config_path=None).scrape_labels == {}


def test_it_rejects_an_unknown_key_in_the_file(tmp_path):
    path = _file(tmp_path, "[agent]\nintreval = 1\n")

    with pytest.raises(ConfigError, match=r"^intreval: unknown key in "):
        config_load(flags={}, environ={}, config_path=path)


def test_it_fails_when_an_explicit_config_file_is_missing(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        config_load(flags={}, environ={}, config_path=str(tmp_path / "nope.conf"))


def test_it_reads_the_token_from_a_token_file(tmp_path):
    secret = tmp_path / "token"
    secret.write_text("s3cret\n")

    config = config_load(flags={}, environ={"ACCELBOARD_TOKEN_FILE": str(secret)}, config_path=None)

    assert config.token == "s3cret"


def test_it_exits_2_with_one_line_on_bad_config(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ACCELBOARD_INTERVAL", "-1")

    code = main(["run", "--token", "t", "--spool", str(tmp_path / "s.db"), "--simulate", "1"])

    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err == ["accelboard-agent: interval: '-1' must be > 0 and <= 3600 (from ACCELBOARD_INTERVAL)"]
    assert not (tmp_path / "s.db").exists()


def test_it_exits_2_without_a_token(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("ACCELBOARD_TOKEN", raising=False)

    code = main(["flush", "--spool", str(tmp_path / "s.db"), "--config", _file(tmp_path, "[agent]\n")])

    assert code == 2
    assert "token: not set" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        (
            {"ACCELBOARD_ATTRIBUTION_NVML": "maybe"},
            "attribution_nvml: 'maybe' is not on/off (true/false, yes/no, 1/0) (from ACCELBOARD_ATTRIBUTION_NVML)",
        ),
        (
            {"ACCELBOARD_KUBELET_SOCKET": "/var/lib/kubelet/pod-resources/kubelet.sock"},
            "kubelet_socket: '/var/lib/kubelet/pod-resources/kubelet.sock' is not a unix:// socket address",
        ),
        (
            {"ACCELBOARD_SLURM_JOB_MAPPING_DIR": "/nonexistent/jobs"},
            "slurm_job_mapping_dir: '/nonexistent/jobs' is not a directory",
        ),
        ({"ACCELBOARD_PROCFS": "/nonexistent/proc"}, "procfs: '/nonexistent/proc' is not a directory"),
        ({"ACCELBOARD_ATTRIBUTION_INTERVAL": "0"}, "attribution_interval: '0' must be > 0"),
        (
            {"ACCELBOARD_ATTRIBUTION_CGROUPS": "on"},
            "attribution_cgroups: needs attribution_nvml on (the cgroups read are those of NVML's processes) "
            "(from ACCELBOARD_ATTRIBUTION_CGROUPS)",
        ),
    ],
)
def test_it_rejects_bad_attribution_settings_naming_the_key(environ, message):
    with pytest.raises(ConfigError) as error:
        config_load(flags={}, environ=environ, config_path=None)

    assert message in str(error.value)


def test_attribution_sources_are_off_by_default_and_switched_on_by_keys(tmp_path):
    assert config_load(flags={}, environ={}, config_path=None).attribution_nvml is False
    path = _file(
        tmp_path,
        f"[agent]\nattribution_nvml = on\nattribution_cgroups = yes\nkubelet = true\nprocfs = {tmp_path}\n",
    )

    config = config_load(flags={}, environ={}, config_path=path)

    assert (config.attribution_nvml, config.attribution_cgroups, config.kubelet) == (True, True, True)
    assert config.kubelet_socket == "unix:///var/lib/kubelet/pod-resources/kubelet.sock"
    assert config.procfs == str(tmp_path) and config.slurm_job_mapping_dir == ""


def _kubelet_files(tmp_path):
    token = tmp_path / "token"
    token.write_text("sa-token\n")
    not_pem = tmp_path / "ca.pem"
    not_pem.write_text("not a certificate\n")
    return str(token), str(not_pem)


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        (
            {"ACCELBOARD_KUBELET_PODS_URL": "127.0.0.1:10250/pods"},
            "kubelet_pods_url: '127.0.0.1:10250/pods' is not an http(s) URL (from ACCELBOARD_KUBELET_PODS_URL)",
        ),
        (
            {"ACCELBOARD_KUBELET_TOKEN_FILE": "/nonexistent/token"},
            "kubelet_token_file: '/nonexistent/token' is not a file (from ACCELBOARD_KUBELET_TOKEN_FILE)",
        ),
        ({"ACCELBOARD_KUBELET_CA_FILE": "{ca}"}, "kubelet_ca_file: '{ca}' holds no PEM certificate"),
        (
            {"ACCELBOARD_KUBELET_INSECURE": "sure"},
            "kubelet_insecure: 'sure' is not on/off (true/false, yes/no, 1/0) (from ACCELBOARD_KUBELET_INSECURE)",
        ),
        (
            {"ACCELBOARD_POD_LABELS": "app, team name"},
            "pod_labels: 'team name' is neither a label key nor a glob of one (app, app.kubernetes.io/*)",
        ),
        (
            {"ACCELBOARD_POD_LABELS": "app"},
            "pod_labels: needs kubelet_pods_url (the kubelet's /pods) (from ACCELBOARD_POD_LABELS)",
        ),
        (
            {"ACCELBOARD_KUBELET_TOKEN_FILE": "{token}"},
            "kubelet_token_file: needs kubelet_pods_url (the kubelet's /pods)",
        ),
        (
            {"ACCELBOARD_KUBELET_PODS_URL": "https://10.0.0.7:10250/pods"},
            "kubelet_pods_url: names and labels the pods that kubelet (pod-resources) or attribution_cgroups "
            "finds; switch one on (from ACCELBOARD_KUBELET_PODS_URL)",
        ),
        (
            {
                "ACCELBOARD_KUBELET": "on",
                "ACCELBOARD_KUBELET_PODS_URL": "http://10.0.0.7:10255/pods",
                "ACCELBOARD_KUBELET_TOKEN_FILE": "{token}",
            },
            "kubelet_token_file: a token is sent over https only (http://10.0.0.7:10255/pods is http)",
        ),
        (
            {
                "ACCELBOARD_KUBELET": "on",
                "ACCELBOARD_KUBELET_PODS_URL": "http://127.0.0.1:10255/pods",
                "ACCELBOARD_KUBELET_INSECURE": "on",
            },
            "kubelet_insecure: is for an https kubelet_pods_url (http://127.0.0.1:10255/pods is http)",
        ),
        (
            {
                "ACCELBOARD_KUBELET": "on",
                "ACCELBOARD_KUBELET_PODS_URL": "https://10.0.0.7:10250/pods",
                "ACCELBOARD_KUBELET_INSECURE": "on",
                "ACCELBOARD_KUBELET_CA_FILE": "/etc/ssl/certs/ca-certificates.crt",
            },
            "kubelet_insecure: verifies nothing; with kubelet_ca_file set, drop one of them",
        ),
    ],
)
def test_it_rejects_bad_pod_list_settings_naming_the_key(environ, message, tmp_path):
    token, not_pem = _kubelet_files(tmp_path)
    environ = {k: v.format(token=token, ca=not_pem) for k, v in environ.items()}
    if environ.get("ACCELBOARD_KUBELET_CA_FILE", "").startswith("/etc/") and not os.path.isfile(
        environ["ACCELBOARD_KUBELET_CA_FILE"]
    ):
        pytest.skip("no system CA bundle at /etc/ssl/certs/ca-certificates.crt")

    with pytest.raises(ConfigError) as error:
        config_load(flags={}, environ=environ, config_path=None)

    assert message.format(token=token, ca=not_pem) in str(error.value)


def test_the_pod_list_is_off_by_default_and_its_keys_read_from_the_file(tmp_path):
    default = config_load(flags={}, environ={}, config_path=None)
    assert (default.kubelet_pods_url, default.pod_labels, default.kubelet_insecure) == ("", [], False)
    token, _ = _kubelet_files(tmp_path)
    path = _file(
        tmp_path,
        "[agent]\nkubelet = on\nkubelet_pods_url = https://10.0.0.7:10250\n"
        f"kubelet_token_file = {token}\nkubelet_insecure = on\n"
        "pod_labels = app, app.kubernetes.io/*,team.example.com/cost-?enter\n",
    )

    config = config_load(flags={}, environ={}, config_path=path)

    assert config.kubelet_pods_url == "https://10.0.0.7:10250/pods"  # the bare port: its /pods
    assert (config.kubelet_token_file, config.kubelet_insecure) == (token, True)
    assert config.pod_labels == ["app", "app.kubernetes.io/*", "team.example.com/cost-?enter"]
    # A token over plain http only to this host (a local proxy), never across the network.
    local = config_load(
        flags={"kubelet_pods_url": "http://127.0.0.1:8001/pods", "kubelet_insecure": "off"},
        environ={},
        config_path=path,
    )
    assert local.kubelet_pods_url == "http://127.0.0.1:8001/pods"
