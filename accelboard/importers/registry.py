"""Detect a file's format by content and run its importer; directories and archives too.

Each format module has ``NAME``, ``sniff(file) -> bool`` (cheap, on the content) and
``parse(file, tree=...) -> list[ParsedRun]``; a module may also have
``companions(file, tree) -> list[path]``, the sibling files it reads, so that a directory walk
does not import them a second time (MLPerf's summary next to its detail log, optimum-benchmark's
config next to its report).

After a module has parsed a file, ``_finalise`` fills what the file lacked, in this order of
trust: the model's name (``-FP8``, ``-AWQ``), the directory names (``1xH100-80GB-SXM``), then the
uploader's context. A context value never overrides the file; a disagreement is a warning.
"""

from __future__ import annotations

import math
from pathlib import Path, PurePosixPath
from types import ModuleType
from typing import Any

from . import (
    codecarbon,
    llmperf,
    lm_eval,
    mlperf_inference,
    mlperf_training,
    nvidia_smi,
    optimum_benchmark,
    pytest_benchmark,
    vllm_serving,
)
from .base import ParsedRun, ParseError, UnrecognisedFormat
from .inputs import DiskTree, InputFile, MemoryTree, Tree, archive_tree, is_archive
from .naming import accelerator_from_text, hints_from_model_name, normalise_precision, variant_name
from .units import UnitError, to_int

# Order matters twice: detection tries formats in this order, and in a directory the files of an
# earlier format are parsed first (MLPerf detail logs claim their summary before it is seen).
_MODULES: list[ModuleType] = [
    mlperf_inference,
    mlperf_training,
    vllm_serving,
    llmperf,
    optimum_benchmark,
    pytest_benchmark,
    lm_eval,
    codecarbon,
    nvidia_smi,
]
FORMATS: dict[str, ModuleType] = {module.NAME: module for module in _MODULES}


class ContextError(ValueError):
    """An uploader's context value that cannot be used (``batch_size=abc``)."""


# context key -> (run field, converter)
_CONTEXT_FIELDS: dict[str, tuple[str, str]] = {
    "model": ("model", "str"),
    "variant": ("variant.name", "str"),
    "precision": ("variant.precision", "precision"),
    "quantization_method": ("variant.quantization_method", "str"),
    "quantization": ("variant.quantization_method", "str"),
    "scenario": ("workload.scenario", "str"),
    "batch_size": ("workload.batch_size", "int"),
    "concurrency": ("workload.concurrency", "int"),
    "input_length": ("workload.input_length", "int"),
    "output_length": ("workload.output_length", "int"),
    "framework": ("workload.framework", "str"),
    "framework_version": ("workload.framework_version", "str"),
    "accelerator": ("hardware.accelerator", "str"),
    "gpu": ("hardware.accelerator", "str"),
    "count": ("hardware.count", "int"),
    "accelerator_count": ("hardware.count", "int"),
    "gpu_count": ("hardware.count", "int"),
    "host": ("hardware.host", "str"),
    "cpu": ("hardware.cpu", "str"),
    "driver_version": ("hardware.driver_version", "str"),
    "cuda_version": ("hardware.cuda_version", "str"),
    "started_at": ("started_at", "str"),
}


def normalise_context(context: dict[str, str] | None) -> dict[str, Any]:
    """Check and convert the uploader's ``k=v`` pairs; raises ContextError naming the key."""
    result: dict[str, Any] = {}
    for key, value in (context or {}).items():
        key = key.strip()
        if not key:
            raise ContextError("context: empty key")
        kind = _CONTEXT_FIELDS.get(key, ("", "str"))[1]
        if kind == "int":
            try:
                number = to_int(value)
            except UnitError as exc:
                raise ContextError(f"context {key}: {exc}") from exc
            if number is None or number < 0:
                raise ContextError(f"context {key}: expected a whole number >= 0, got {value!r}")
            result[key] = number
        elif kind == "precision":
            precision = normalise_precision(value)
            if not precision:
                raise ContextError(
                    f"context {key}: unknown precision {value!r} (fp32, bf16, fp16, fp8, int8, int4, fp4)"
                )
            result[key] = precision
        else:
            result[key] = str(value).strip()
    return result


def detect(source: str | Path | bytes, *, name: str = "<bytes>") -> str:
    """The format name of a file (path or bytes); for a directory or archive, of its first result.

    Raises UnrecognisedFormat listing the formats that were tried."""
    if isinstance(source, bytes):
        if is_archive(source):
            return _detect_tree(archive_tree(source, name=name), name)
        return _detect_file(InputFile(PurePosixPath(name), source))
    path = Path(source)
    if path.is_dir():
        return _detect_tree(DiskTree(path), str(path))
    data = path.read_bytes()
    if is_archive(data):
        return _detect_tree(archive_tree(data, name=str(path)), str(path))
    return _detect_file(InputFile(PurePosixPath(path.resolve().as_posix()), data))


def _sniff(file: InputFile) -> str | None:
    for module in _MODULES:
        if module.sniff(file):
            return module.NAME
    return None


def _detect_file(file: InputFile) -> str:
    found = _sniff(file)
    if found is None:
        raise UnrecognisedFormat(file.display, list(FORMATS))
    return found


def _detect_tree(tree: Tree, name: str) -> str:
    for path in tree.files():
        file = tree.open(path)
        if file is not None and (found := _sniff(file)):
            return found
    raise UnrecognisedFormat(name, list(FORMATS), hint="no file in it was recognised")


def parse_path(
    path: str | Path, *, fmt: str | None = None, context: dict[str, str] | None = None
) -> list[ParsedRun]:
    """Parse a file, a directory or an archive on disk into runs."""
    path = Path(path)
    ctx = normalise_context(context)
    module = _module(fmt)
    if path.is_dir():
        return _parse_tree(DiskTree(path), str(path), module, ctx)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ParseError(str(path), f"cannot read: {exc.strerror or exc}") from exc
    if is_archive(data):
        return _parse_tree(_archive(data, str(path)), str(path), module, ctx)
    file = InputFile(PurePosixPath(path.resolve().as_posix()), data)
    return _parse_file(file, DiskTree(path.parent), module, ctx)


def parse_bytes(
    data: bytes, *, filename: str, fmt: str | None = None, context: dict[str, str] | None = None
) -> list[ParsedRun]:
    """Parse an upload (one file's bytes, or an archive's) into runs."""
    ctx = normalise_context(context)
    module = _module(fmt)
    if is_archive(data):
        return _parse_tree(_archive(data, filename), filename, module, ctx)
    file = InputFile(PurePosixPath(filename), data)
    return _parse_file(file, MemoryTree({file.path: data}), module, ctx)


def _module(fmt: str | None) -> ModuleType | None:
    if fmt is None:
        return None
    if fmt not in FORMATS:
        raise ContextError(f"unknown format {fmt!r}; known: {', '.join(FORMATS)}")
    return FORMATS[fmt]


def _archive(data: bytes, name: str) -> MemoryTree:
    try:
        return archive_tree(data, name=name)
    except ValueError as exc:
        raise ParseError(name, str(exc).removeprefix(f"{name}: ")) from exc


def _parse_file(
    file: InputFile, tree: Tree, module: ModuleType | None, context: dict[str, Any]
) -> list[ParsedRun]:
    if module is None:
        name = _sniff(file)
        if name is None:
            raise UnrecognisedFormat(file.display, list(FORMATS))
        module = FORMATS[name]
    try:
        runs = module.parse(file, tree=tree)
    except ParseError:
        raise
    except (UnitError, KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        # A parser met a shape it did not expect: still the file's fault, never a crash.
        raise ParseError(
            file.display, f"not a valid {module.NAME} file ({type(exc).__name__}: {exc})"
        ) from exc
    if not runs:
        raise ParseError(file.display, f"no results found for format {module.NAME}")
    for run in runs:
        _finalise(run, file.path, context)
    return runs


def _parse_tree(tree: Tree, name: str, module: ModuleType | None, context: dict[str, Any]) -> list[ParsedRun]:
    found: list[tuple[int, InputFile, ModuleType]] = []
    skipped: list[str] = []
    for path in tree.files():
        file = tree.open(path)
        if file is None:
            continue
        if module is not None:
            matched = module if module.sniff(file) else None
        else:
            detected = _sniff(file)
            matched = FORMATS[detected] if detected else None
        if matched is None:
            skipped.append(str(path))
            continue
        found.append((_MODULES.index(matched), file, matched))
    consumed: set[PurePosixPath] = set()
    runs: list[ParsedRun] = []
    for _order, file, matched in sorted(
        found, key=lambda item: (item[0], _priority(item[1]), str(item[1].path))
    ):
        if file.path in consumed:
            continue
        companions = getattr(matched, "companions", None)
        if companions is not None:
            consumed.update(companions(file, tree))
        runs.extend(_parse_file(file, tree, matched, context))
    if not runs:
        tried = [module.NAME] if module is not None else list(FORMATS)
        raise UnrecognisedFormat(name, tried, hint=f"none of its {len(skipped)} files was recognised")
    return runs


def _priority(file: InputFile) -> int:
    # Within one format, files that carry more (MLPerf detail logs) go first.
    return 0 if "detail" in file.name else 1


def _finalise(run: ParsedRun, path: PurePosixPath, context: dict[str, Any]) -> None:
    precision, method = hints_from_model_name(run.model)
    run.fill("variant.precision", precision, "model-name")
    run.fill("variant.quantization_method", method, "model-name")
    if not run.hardware.accelerator:
        for part in reversed(path.parts[:-1]):
            accelerator, count = accelerator_from_text(part)
            if accelerator:
                run.put("hardware.accelerator", accelerator, "path")
                run.fill("hardware.count", count, "path")
                break
    context_apply(run, context)
    if not run.variant.name:
        run.put(
            "variant.name",
            variant_name(run.variant.precision, run.variant.quantization_method),
            "derived:precision+quantization_method",
        )
    if not run.model:
        run.warnings.append("model unknown: give it with --context model=NAME")
    if not run.hardware.accelerator and not run.hardware.cpu:
        run.warnings.append("hardware unknown: give it with --context accelerator=NAME count=N")
    if not run.variant.precision:
        run.warnings.append("precision unknown: give it with --context precision=bf16|fp8|int4...")


def context_apply(run: ParsedRun, context: dict[str, Any], *, who: str = "the context") -> None:
    """Fill the run's empty fields from normalised ``key=value`` context (marked ``user``); a value
    the file already has is kept, and a disagreement becomes a warning naming both sides."""
    for key, value in context.items():
        target = _CONTEXT_FIELDS.get(key)
        if target is None:
            run.context[key] = value
            run.field_sources[f"context.{key}"] = "user"
            continue
        field_path = target[0]
        current = run.get(field_path)
        if current in (None, ""):
            run.put(field_path, value, "user")
        elif not _same(current, value):
            run.warnings.append(
                f"{field_path}: the file says {current!r} ({run.field_sources.get(field_path, '?')}), "
                f"{who} says {value!r}; kept the file's value"
            )


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(float(a), float(b))
    return str(a).strip().lower() == str(b).strip().lower()
