"""What MLPerf Inference and Training share: the results-tree layout and the system JSON.

Layout: ``<division>/<Submitter>/systems/<system>.json`` and
``<division>/<Submitter>/results/<system>/<model or benchmark>/...``. The system, model and
scenario are known only from the path, so they are read from it here.
Loose files uploaded together (no such path: one folder holding the logs, ``<system>.json`` and
``<system>_<Scenario>.json``) are one submission: the system and measurement descriptions are
found among the files given with the log, by content (``is_system``, ``is_measurement``).
System JSON types are inconsistent (``8`` or ``"8"``, ``""`` for unknown, ``"N/A"`` on CPU-only
systems) and ``other_software_stack`` is a string (inference) or an object (training).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from . import jsondepth
from .base import ParsedRun, ParseError
from .inputs import Tree
from .units import UnitError, is_sentinel, to_int


@dataclass(frozen=True)
class ResultPath:
    root: PurePosixPath  # the submitter folder, parent of systems/ and results/
    division: str
    submitter: str
    system: str
    model: str
    rest: tuple[str, ...]  # the parts after the model folder


def result_path(path: PurePosixPath) -> ResultPath | None:
    parts = path.parts
    for index in range(len(parts) - 1, -1, -1):
        if parts[index] == "results" and len(parts) - index >= 4:
            root = PurePosixPath(*parts[:index]) if index else PurePosixPath(".")
            return ResultPath(
                root=root,
                division=parts[index - 2] if index >= 2 else "",
                submitter=parts[index - 1] if index >= 1 else "",
                system=parts[index + 1],
                model=parts[index + 2],
                rest=tuple(parts[index + 3 :]),
            )
    return None


def load_json(tree: Tree, path: PurePosixPath) -> tuple[dict[str, Any], str] | None:
    """A sibling JSON object and its display name, None when absent; ParseError when broken."""
    data = tree.read(path)
    if data is None:
        return None
    try:
        obj = jsondepth.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError, jsondepth.JsonTooDeep) as exc:
        line = getattr(exc, "lineno", getattr(exc, "line", None))
        raise ParseError(str(path), f"broken JSON ({exc})", line=line) from exc
    if not isinstance(obj, dict):
        raise ParseError(str(path), "expected a JSON object")
    return obj, str(path)


def _int_field(obj: dict[str, Any], key: str, name: str) -> int | None:
    try:
        return to_int(obj.get(key))
    except UnitError as exc:
        raise ParseError(name, str(exc), key=key) from exc


_VERSION = re.compile(r"^\s*([A-Za-z][\w.\- ]*?)\s+v?(\d[\w.\-]*)")


def is_system(obj: Any) -> bool:
    """An MLPerf system description (``systems/<system>.json``, Inference or Training)."""
    return (
        isinstance(obj, dict)
        and "accelerator_model_name" in obj
        and any(key in obj for key in ("accelerators_per_node", "system_name", "host_processor_model_name"))
    )


def is_measurement(obj: Any) -> bool:
    """An MLPerf Inference measurement description (``measurements/.../<system>_<Scenario>.json``)."""
    return isinstance(obj, dict) and "weight_data_types" in obj


def describes(file_head: bytes) -> str:
    """Which description a JSON file is, from its first bytes (cheap, before parsing): "system",
    "measurement", or "" for neither."""
    head = file_head.decode("utf-8", "replace")
    if not head.lstrip().startswith("{"):
        return ""
    if '"accelerator_model_name"' in head:
        return "system"
    if '"weight_data_types"' in head:
        return "measurement"
    return ""


def flat_siblings(
    tree: Tree, folder: PurePosixPath, kind: str
) -> list[tuple[dict[str, Any], str, PurePosixPath]]:
    """The system or measurement descriptions given in ``folder`` with a loose log (by content).
    Looking does not count as using: the caller reads the one it uses (``tree.read``)."""
    found = []
    for path in tree.files():
        if path.parent != folder or path.suffix.lower() != ".json":
            continue
        data = tree.peek(path)
        if data is None or describes(data[:65536]) != kind:
            continue
        try:
            obj = jsondepth.loads(data.decode("utf-8-sig"))
        except (UnicodeDecodeError, json.JSONDecodeError, jsondepth.JsonTooDeep) as exc:
            line = getattr(exc, "lineno", getattr(exc, "line", None))
            raise ParseError(str(path), f"broken JSON ({exc})", line=line) from exc
        if (is_system if kind == "system" else is_measurement)(obj):
            found.append((obj, path.name, path))
    return found


def apply_system(
    run: ParsedRun, tree: Tree, info: ResultPath | None, *, folder: PurePosixPath | None = None
) -> bool:
    """Fill hardware, framework and versions from ``systems/<system>.json`` (or, for loose files,
    the one system description given with them in ``folder``); False when there is none."""
    if info is not None:
        loaded = load_json(tree, info.root / "systems" / f"{info.system}.json")
        if loaded is None:
            run.warnings.append(
                f"no systems/{info.system}.json next to the results: hardware from path or context"
            )
            return False
        system, name = loaded[0], f"systems/{info.system}.json"
    else:
        candidates = flat_siblings(tree, folder, "system") if folder is not None else []
        if len(candidates) != 1:
            if len(candidates) > 1:
                names = ", ".join(sorted(n for _, n, _ in candidates))
                run.warnings.append(f"several system descriptions given ({names}): none used")
            return False
        system, name, path = candidates[0]
        tree.read(path)  # used by this run
        run.context.setdefault("mlperf_system", PurePosixPath(name).stem)

    def src(key: str) -> str:
        return f"file:{name}:{key}"

    per_node = _int_field(system, "accelerators_per_node", name)
    nodes = _int_field(system, "number_of_nodes", name) or 1
    accelerator = system.get("accelerator_model_name")
    if not is_sentinel(accelerator) and per_node:
        run.put("hardware.accelerator", str(accelerator).strip(), src("accelerator_model_name"))
        run.put("hardware.count", per_node * nodes, src("accelerators_per_node*number_of_nodes"))
    else:
        run.put("hardware.count", 0, src("accelerators_per_node"))
    cpu = system.get("host_processor_model_name")
    if not is_sentinel(cpu):
        run.put("hardware.cpu", str(cpu).strip(), src("host_processor_model_name"))
    framework = system.get("framework")
    if isinstance(framework, str) and not is_sentinel(framework):
        first = framework.split(",")[0]
        match = _VERSION.match(first)
        if match:
            run.put("workload.framework", match.group(1).strip(), src("framework"))
            run.put("workload.framework_version", match.group(2), src("framework"))
        else:
            run.put("workload.framework", first.strip(), src("framework"))
    stack = system.get("other_software_stack")
    if isinstance(stack, dict):
        run.put(
            "hardware.cuda_version",
            str(stack.get("cuda_version") or ""),
            src("other_software_stack.cuda_version"),
        )
        driver = stack.get("cuda_driver_version") or stack.get("nvidia_kernel_driver") or ""
        run.put("hardware.driver_version", str(driver), src("other_software_stack.cuda_driver_version"))
    else:
        text = f"{framework or ''}, {stack or ''}"
        if cuda := re.search(r"CUDA\s*(\d+(?:\.\d+)*)", text, re.IGNORECASE):
            run.put("hardware.cuda_version", cuda.group(1), src("other_software_stack"))
        if driver := re.search(r"Driver\s*(\d+(?:\.\d+)*)", text, re.IGNORECASE):
            run.put("hardware.driver_version", driver.group(1), src("other_software_stack"))
    for key in (
        "submitter",
        "division",
        "status",
        "system_name",
        "system_type",
        "accelerator_memory_capacity",
    ):
        value = system.get(key)
        if not is_sentinel(value) and value is not None:
            run.context[f"system_{key}" if not key.startswith("system_") else key] = value
    return True
