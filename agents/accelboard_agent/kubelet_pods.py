"""Pod names and labels from the kubelet's ``/pods`` endpoint (a Kubernetes ``PodList`` as JSON).

1. One ``GET`` of ``url`` (``kubelet_pods_url``): the kubelet's authenticated port
   (``https://<node>:10250/pods``, RBAC ``get`` on ``nodes/pods`` where the kubelet's
   fine-grained authorization is on, else ``nodes/proxy``) with ``Authorization: Bearer`` and the
   token of ``token_file``, or its read-only port (``http://127.0.0.1:10255/pods``, no token).
   The token file is read again whenever it changed (a projected service-account token rotates).
   TLS is verified against ``ca_file`` (else the system's trust store); ``insecure`` switches
   verification off, only when the operator says so.
2. Read from each pod: ``metadata.{uid, namespace, name, labels}`` and the containers'
   ``status.*containerStatuses[].{name, containerID}`` (``containerd://<id>``), so a process whose
   cgroup names a pod UID and a container id gets the pod's namespace, name, labels and the
   container's name.
3. The list is cached: asked again when it is ``max_age`` old (30 s), or earlier when a pod
   looked up is not in it (a pod just started), at most once per ``min_interval`` (2 s) and once
   per unknown pod until the next regular refresh. After a failure the next try waits
   ``max_age``; the last list read stays in use (a pod's UID, name and labels rarely change).
   A failure is logged once per outage.
4. ``labels_allowed``: the labels an allowlist of keys or shell-style globs (``app``,
   ``app.kubernetes.io/*``) lets through, minus those the server would refuse (a control
   character, a key over 63 or a value over 256 characters, more than 64: the server refuses the
   whole batch over one), each left out with one warning per key.
"""

from __future__ import annotations

import fnmatch
import http.client
import json
import logging
import os
import re
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Callable

log = logging.getLogger("accelboard_agent.kubelet_pods")

MAX_AGE_S = 30.0
MIN_INTERVAL_S = 2.0  # below the default attribution_interval: each observation may ask once
# A node runs at most a few hundred pods; their list is a few MB. A larger answer is not a pod list.
MAX_BODY_BYTES = 64 << 20
# The server's limits on a workload's labels (accelboard/fleet/attribution_validation.py).
MAX_LABELS = 64
MAX_LABEL_KEY = 63
MAX_LABEL_VALUE = 256
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class KubeletPodsError(Exception):
    """The pod list cannot be read; the message is one line for the operator."""


@dataclass(frozen=True)
class PodInfo:
    """One pod of the kubelet's list."""

    uid: str
    namespace: str
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    # Container id (the runtime's hex id, without ``containerd://``) -> container name.
    containers: Mapping[str, str] = field(default_factory=dict)


def pod_list_parse(data: bytes) -> list[PodInfo]:
    """The pods of a ``PodList`` JSON document; ``KubeletPodsError`` when it is not one."""
    try:
        document = json.loads(data)
    except ValueError as exc:
        raise KubeletPodsError(f"the answer is not JSON ({exc})") from None
    items = document.get("items") if isinstance(document, dict) else None
    if not isinstance(items, list):
        raise KubeletPodsError("the answer is not a PodList (no items list)")
    pods: list[PodInfo] = []
    for item in items:
        metadata = item.get("metadata") if isinstance(item, dict) else None
        if not isinstance(metadata, dict):
            continue
        uid, namespace, name = (metadata.get(key) for key in ("uid", "namespace", "name"))
        if not (isinstance(uid, str) and isinstance(namespace, str) and isinstance(name, str)):
            continue
        if not (uid and namespace and name):
            continue
        labels = metadata.get("labels")
        labels = {k: v for k, v in labels.items() if isinstance(v, str)} if isinstance(labels, dict) else {}
        status = item.get("status")
        containers: dict[str, str] = {}
        if isinstance(status, dict):
            for kind in ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses"):
                statuses = status.get(kind)
                for container in statuses if isinstance(statuses, list) else []:
                    if not isinstance(container, dict):
                        continue
                    container_id, container_name = container.get("containerID"), container.get("name")
                    if isinstance(container_id, str) and isinstance(container_name, str) and container_id:
                        containers[container_id.split("://", 1)[-1]] = container_name
        pods.append(PodInfo(uid, namespace, name, labels, containers))
    return pods


def tls_context(*, ca_file: str = "", insecure: bool = False) -> ssl.SSLContext:
    """The TLS context for the kubelet: verified against ``ca_file`` (else the system's trust
    store), or not verified at all where ``insecure``. Raises ``OSError``/``ssl.SSLError`` for a
    CA file that cannot be read."""
    context = ssl.create_default_context(cafile=ca_file or None)
    if insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def _label_problem(key: str, value: str) -> str:
    if len(key) > MAX_LABEL_KEY:
        return f"its key is over {MAX_LABEL_KEY} characters"
    if len(value) > MAX_LABEL_VALUE:
        return f"its value is over {MAX_LABEL_VALUE} characters"
    if _CONTROL.search(key) or _CONTROL.search(value):
        return "it holds a control character"
    return ""


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None  # the 3xx comes back as an HTTPError


class KubeletPods:
    """The kubelet's pod list, cached (this module's docstring). Thread-safe."""

    def __init__(
        self,
        url: str,
        *,
        token_file: str = "",
        ca_file: str = "",
        insecure: bool = False,
        timeout: float = 5.0,
        max_age: float = MAX_AGE_S,
        min_interval: float = MIN_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url = url
        self.token_file = token_file
        self.timeout = timeout
        self.max_age = max_age
        self.min_interval = min_interval
        self.clock = clock
        handlers: list[urllib.request.BaseHandler] = [urllib.request.ProxyHandler({}), _NoRedirect()]
        if url.startswith("https:"):
            handlers.append(
                urllib.request.HTTPSHandler(context=tls_context(ca_file=ca_file, insecure=insecure))
            )
        # No proxy from the environment (the kubelet is this node's) and no redirect (the token
        # would follow it).
        self._opener = urllib.request.build_opener(*handlers)
        self._lock = threading.Lock()
        self._token = ""
        self._token_stamp: tuple[int, int, int] | None = None
        self._by_uid: dict[str, PodInfo] = {}
        self._by_name: dict[tuple[str, str], PodInfo] = {}
        self._last_try: float | None = None
        self._failing = False
        self._unknown: set[str | tuple[str, str]] = set()  # looked up, missing from a list read since
        self._warned: set[str] = set()
        self.requests = 0

    # -- the request ----------------------------------------------------------------------------

    def _bearer(self) -> str:
        """The token, read again when its file changed (a rotated token replaces the file)."""
        try:
            stat = os.stat(self.token_file)
            stamp = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
            if stamp != self._token_stamp:
                with open(self.token_file, encoding="utf-8") as handle:
                    self._token = handle.read().strip()
                self._token_stamp = stamp
        except OSError as exc:
            raise KubeletPodsError(
                f"cannot read kubelet_token_file {self.token_file}: {exc.strerror}"
            ) from None
        return self._token

    def read(self) -> list[PodInfo]:
        """The kubelet's pods now (one request); ``KubeletPodsError`` when it cannot say."""
        request = urllib.request.Request(self.url, headers={"Accept": "application/json"})
        if self.token_file:
            request.add_header("Authorization", f"Bearer {self._bearer()}")
        self.requests += 1
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                data = response.read(MAX_BODY_BYTES + 1)
        except urllib.error.HTTPError as exc:
            try:
                lines = exc.read(200).decode("utf-8", "replace").strip().splitlines()
            except (OSError, http.client.HTTPException):
                lines = []
            detail = f": {lines[0]}" if lines else ""
            raise KubeletPodsError(f"HTTP {exc.code}{detail}") from None
        except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as exc:
            cause = exc.reason if isinstance(exc, urllib.error.URLError) else exc
            raise KubeletPodsError(str(cause) or type(cause).__name__) from None
        if len(data) > MAX_BODY_BYTES:
            raise KubeletPodsError(f"the answer is over {MAX_BODY_BYTES >> 20} MiB")
        return pod_list_parse(data)

    # -- the cache ------------------------------------------------------------------------------

    def _refresh(self, now: float) -> None:
        self._last_try = now
        try:
            pods = self.read()
        except KubeletPodsError as exc:
            if not self._failing:
                log.warning(
                    "kubelet pods %s: %s; pod names and labels unknown until it answers", self.url, exc
                )
            self._failing = True
            return
        if self._failing:
            log.warning("kubelet pods %s answers again", self.url)
        self._failing = False
        self._by_uid = {pod.uid: pod for pod in pods}
        self._by_name = {(pod.namespace, pod.name): pod for pod in pods}

    def _find(self, key: str | tuple[str, str]) -> PodInfo | None:
        return self._by_uid.get(key) if isinstance(key, str) else self._by_name.get(key)

    def _lookup(self, key: str | tuple[str, str]) -> PodInfo | None:
        with self._lock:
            now = self.clock()
            if self._last_try is None or now - self._last_try >= self.max_age:
                self._refresh(now)
                self._unknown.clear()
            found = self._find(key)
            if (
                found is None
                and key not in self._unknown
                and not self._failing
                and now - (self._last_try or 0.0) >= self.min_interval
            ):
                # A pod not listed yet (just started): read again now, once for this pod.
                self._refresh(now)
                found = self._find(key)
                if found is None and not self._failing:
                    self._unknown.add(key)
            return found

    def by_uid(self, uid: str) -> PodInfo | None:
        """The pod with this UID, or None (not listed, or the kubelet never answered)."""
        return self._lookup(uid)

    def by_name(self, namespace: str, name: str) -> PodInfo | None:
        return self._lookup((namespace, name))

    # -- labels ---------------------------------------------------------------------------------

    def _warn(self, key: str, why: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning("pod label %r left out: %s (the server would refuse the batch)", key[:80], why)

    def labels_allowed(self, labels: Mapping[str, str], patterns: Iterable[str]) -> dict[str, str]:
        """The labels ``patterns`` (keys or shell-style globs) let through that the server takes."""
        patterns = list(patterns)
        chosen: dict[str, str] = {}
        for key in sorted(labels):
            if not any(fnmatch.fnmatchcase(key, pattern) for pattern in patterns):
                continue
            problem = _label_problem(key, labels[key])
            if problem:
                self._warn(key, problem)
            elif len(chosen) >= MAX_LABELS:
                self._warn(key, f"a pod may carry at most {MAX_LABELS} labels (the first by key are sent)")
            else:
                chosen[key] = labels[key]
        return chosen
