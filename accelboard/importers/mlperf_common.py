"""What MLPerf Inference and Training share: the results-tree layout and the system JSON.

Layout: ``<division>/<Submitter>/systems/<system>.json`` and
``<division>/<Submitter>/results/<system>/<model or benchmark>/...``. The system, model and
scenario are known only from the path (FORMATS.md, section 1), so they are read from it here.
System JSON types are inconsistent (``8`` or ``"8"``, ``""`` for unknown, ``"N/A"`` on CPU-only
systems) and ``other_software_stack`` is a string (inference) or an object (training).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

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
        obj = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        line = getattr(exc, "lineno", None)
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


def apply_system(run: ParsedRun, tree: Tree, info: ResultPath) -> bool:
    """Fill hardware, framework and versions from ``systems/<system>.json``; False when absent."""
    loaded = load_json(tree, info.root / "systems" / f"{info.system}.json")
    if loaded is None:
        run.warnings.append(
            f"no systems/{info.system}.json next to the results: hardware from path or context"
        )
        return False
    system, name = loaded[0], f"systems/{info.system}.json"

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
