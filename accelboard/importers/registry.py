"""Detect a file's format by content and run its importer; directories, archives and files given
together too.

Each format module has ``NAME``, ``sniff(file) -> bool`` (cheap, on the content) and
``parse(file, tree=...) -> list[ParsedRun]``; a module may also have
``companions(file, tree) -> list[path]``, the sibling files a run claims, so that a walk does
not import them a second time (MLPerf's summary and accuracy folder, optimum-benchmark's config);
``priority(file) -> int``, the order of its files in a walk (MLPerf's performance logs before
the accuracy pass); ``auxiliary(file) -> str | None``, what a file that completes a run but holds
no result is (an MLPerf system JSON), so that it is never called "unrecognised".

Files given together (``parse_files``, ``parse_paths``) are one submission, walked as a
directory is: every file a run reads is part of that run (``ParsedRun.files``), not a run of its
own, so loose MLPerf files give the run their archive gives.

After a module has parsed a file, ``_finalise`` fills what the file lacked, in this order of
trust: the model's name (``-FP8``, ``-AWQ``), the directory names (``1xH100-80GB-SXM``), then the
uploader's context. A context value never overrides the file; a disagreement is a warning.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path, PurePosixPath
from types import ModuleType
from typing import Any

from . import (
    aiperf,
    codecarbon,
    genai_perf,
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
from .hostnames import hostname_problem
from .inputs import (
    DiskTree,
    FileSetTree,
    InputFile,
    RecordingTree,
    Tree,
    archive_tree,
    check_cost,
    is_archive,
)
from .naming import (
    accelerator_from_text,
    hints_from_model_name,
    normalise_precision,
    split_model_name,
    variant_name,
)
from .profile_registry import PROFILE_FORMATS
from .units import UnitError, to_int

# Order matters twice: detection tries formats in this order, and in a directory the files of an
# earlier format are parsed first (MLPerf detail logs claim their summary before it is seen).
_MODULES: list[ModuleType] = [
    mlperf_inference,
    mlperf_training,
    vllm_serving,
    llmperf,
    aiperf,
    genai_perf,
    optimum_benchmark,
    pytest_benchmark,
    lm_eval,
    codecarbon,
    nvidia_smi,
]
FORMATS: dict[str, ModuleType] = {module.NAME: module for module in _MODULES}
# What an "unrecognised format" error says was tried: the result formats and the profile formats
# (a profiler trace is read by ``profile_registry`` before the result formats are asked).
TRIED: list[str] = [*FORMATS, *PROFILE_FORMATS]


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
    "host": ("hardware.host", "host"),
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
        elif kind == "host" and (problem := hostname_problem(str(value))) is not None:
            raise ContextError(f"context {key}: {problem}")
        else:
            result[key] = str(value).strip()
    return result


@dataclass
class Submission:
    """What files given together became: their runs, and one error per file that failed (a broken
    file, an unrecognised one, a system description that no result used). The runs of the files
    that parsed are kept whatever happened to the others."""

    runs: list[ParsedRun] = field(default_factory=list)
    errors: list[ParseError | UnrecognisedFormat] = field(default_factory=list)
    # ``parse_files`` only: for each run, the indexes of the given files it was read from (an
    # archive's runs: the archive's), so that a caller can keep each run's own files.
    sources: list[tuple[int, ...]] = field(default_factory=list)
    # ``parse_files`` only: for each error, the index of the given file it is about (None: unknown).
    error_sources: list[int | None] = field(default_factory=list)


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


def _auxiliary(file: InputFile, only: ModuleType | None = None) -> tuple[ModuleType, str] | None:
    """(format, what it is) for a file that completes a run but holds no result (an MLPerf system
    description, an optimum-benchmark config): recognised, so never called "unrecognised"."""
    for module in [only] if only is not None else _MODULES:
        describe = getattr(module, "auxiliary", None)
        what = describe(file) if describe is not None else None
        if what:
            return module, what
    return None


def _detect_file(file: InputFile) -> str:
    found = _sniff(file)
    if found is None:
        described = _auxiliary(file)
        if described is not None:
            return described[0].NAME
        raise UnrecognisedFormat(file.display, list(TRIED))
    return found


def _detect_tree(tree: Tree, name: str) -> str:
    for path in tree.files():
        file = tree.open(path)
        if file is not None and (found := _sniff(file)):
            return found
    raise UnrecognisedFormat(name, list(TRIED), hint="no file in it was recognised")


def parse_path(
    path: str | Path, *, fmt: str | None = None, context: dict[str, str] | None = None
) -> list[ParsedRun]:
    """Parse a file, a directory or an archive on disk into runs."""
    path = Path(path)
    ctx = normalise_context(context)
    module = _module(fmt)
    if path.is_dir():
        return _walk(DiskTree(path), str(path), module, ctx, strict=True).runs
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ParseError(str(path), f"cannot read: {exc.strerror or exc}") from exc
    if is_archive(data):
        return _walk(_archive(data, str(path)), str(path), module, ctx, strict=True).runs
    file = InputFile(PurePosixPath(path.resolve().as_posix()), data)
    # the file alone is what was given; its siblings on disk are still read when a format needs them
    return _parse_file(
        file, FileSetTree({file.path: data}, fallback=DiskTree(path.parent), checked=False), module, ctx
    )


def parse_bytes(
    data: bytes, *, filename: str, fmt: str | None = None, context: dict[str, str] | None = None
) -> list[ParsedRun]:
    """Parse an upload (one file's bytes, or an archive's) into runs."""
    ctx = normalise_context(context)
    module = _module(fmt)
    if is_archive(data):
        return _walk(_archive(data, filename), filename, module, ctx, strict=True).runs
    file = InputFile(PurePosixPath(filename), check_cost(filename, data))
    return _parse_file(file, FileSetTree({file.path: data}), module, ctx)


def parse_files(
    files: Iterable[tuple[str, bytes]], *, fmt: str | None = None, context: dict[str, str] | None = None
) -> Submission:
    """Files uploaded together, as (name, bytes): one submission, grouped the way a directory or
    an archive of the same files would be (an MLPerf run's summary, detail log, system and
    measurement JSON and accuracy.txt become one run). Names may carry folders (a browser's
    folder upload); an archive among them is read as its own tree. Errors are per file."""
    ctx = normalise_context(context)
    module = _module(fmt)
    loose: dict[PurePosixPath, bytes] = {}
    given: dict[str, int] = {}
    result = Submission()
    for index, (name, data) in enumerate(files):
        if is_archive(data):
            part = _tree_submission(partial(_archive, data, name), name, module, ctx)
            _extend(result, part)
            result.sources.extend((index,) for _ in part.runs)
            result.error_sources.extend(index for _ in part.errors)
            continue
        path = _member_path(name, loose)
        loose[path] = data
        given[str(path)] = index
    if loose:
        # a folder upload (names with folders) is a directory: its other files are not errors
        folder_upload = any(len(path.parts) > 1 for path in loose)
        walked = _walk(
            FileSetTree(loose), "upload", module, ctx, strict=False, report_skipped=not folder_upload
        )
        _extend(result, walked)
        result.sources.extend(
            tuple(sorted({given[used] for used in run.files if used in given})) for run in walked.runs
        )
        result.error_sources.extend(given.get(error.file) for error in walked.errors)
    return result


def parse_paths(
    paths: Iterable[str | Path], *, fmt: str | None = None, context: dict[str, str] | None = None
) -> Submission:
    """Files on disk given together (``accelboard parse f1 f2 ...``): one submission, as
    ``parse_files``; siblings that a format looks for (``systems/`` two levels up) are still read
    from disk. Directories and archives are each their own tree. Runs and errors come in the
    order the paths were given (the loose files' runs where the first loose file was)."""
    ctx = normalise_context(context)
    module = _module(fmt)
    loose: dict[PurePosixPath, bytes] = {}
    parts: list[Submission | None] = []  # None: where the loose files' runs go
    for item in paths:
        path = Path(item)
        part = Submission()
        try:
            if path.is_dir():
                parts.append(
                    _tree_submission(partial(DiskTree, path), str(path), module, ctx, every_file=True)
                )
                continue
            data = path.read_bytes()
        except FileNotFoundError:
            part.errors.append(ParseError(str(path), "no such file or directory"))
            parts.append(part)
            continue
        except OSError as exc:
            part.errors.append(ParseError(str(path), f"cannot read: {exc.strerror or exc}"))
            parts.append(part)
            continue
        if is_archive(data):
            parts.append(
                _tree_submission(partial(_archive, data, str(path)), str(path), module, ctx, every_file=True)
            )
            continue
        if not loose:
            parts.append(None)
        loose[PurePosixPath(path.resolve().as_posix())] = data
    group = Submission()
    if loose:
        group = _walk(
            FileSetTree(loose, fallback=DiskTree(Path.cwd()), checked=False),
            "the files given",
            module,
            ctx,
            strict=False,
        )
        given = {str(path): index for index, path in enumerate(loose)}
        group.errors.sort(key=lambda error: given.get(error.file, len(given)))
    result = Submission()
    for done in parts:
        _extend(result, group if done is None else done)
    return result


def _tree_submission(
    make: Callable[[], Tree],
    name: str,
    module: ModuleType | None,
    context: dict[str, Any],
    *,
    every_file: bool = False,
) -> Submission:
    """A directory or an archive given with other files: read as ``parse_path`` reads it (its
    first error stops it, its files that are not results are ignored), its error kept as one.
    With ``every_file`` (``accelboard parse DIR``) every result file in it is read and each one
    that fails is an error of its own, so that a bad file never hides the others; a tree with no
    result at all is one error."""
    if not every_file:
        try:
            return _walk(make(), name, module, context, strict=True)
        except (ParseError, UnrecognisedFormat) as exc:
            return Submission(errors=[exc])
    try:
        result = _walk(make(), name, module, context, strict=False, report_skipped=False)
    except (ParseError, UnrecognisedFormat) as exc:
        return Submission(errors=[exc])
    if not result.runs and not result.errors:
        tried = [module.NAME] if module is not None else list(FORMATS)
        result.errors.append(UnrecognisedFormat(name, tried, hint="none of its files was recognised"))
    return result


def _extend(result: Submission, other: Submission) -> None:
    result.runs.extend(other.runs)
    result.errors.extend(other.errors)


def _member_path(name: str, taken: dict[PurePosixPath, bytes]) -> PurePosixPath:
    """An upload's name as a safe relative path; a second file of the same name goes to its own
    folder (``duplicate-2/``), so the two are never mistaken for one run's files."""
    parts = [part for part in PurePosixPath(name.replace("\\", "/")).parts if part not in ("/", ".", "..")]
    path = PurePosixPath(*parts) if parts else PurePosixPath("upload")
    candidate, number = path, 1
    while candidate in taken:
        number += 1
        candidate = PurePosixPath(f"duplicate-{number}") / path
    return candidate


def _module(fmt: str | None) -> ModuleType | None:
    if fmt is None:
        return None
    if fmt not in FORMATS:
        raise ContextError(f"unknown format {fmt!r}; known: {', '.join(FORMATS)}")
    return FORMATS[fmt]


def _archive(data: bytes, name: str) -> Tree:
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
            described = _auxiliary(file)
            if described is not None:
                raise ParseError(
                    file.display,
                    f"{described[1]}: it holds no result; give it together with the result files it describes",
                )
            raise UnrecognisedFormat(file.display, list(TRIED))
        module = FORMATS[name]
    recorder = RecordingTree(tree)
    try:
        runs = module.parse(file, tree=recorder)
    except ParseError:
        raise
    except (UnitError, KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        # A parser met a shape it did not expect: still the file's fault, never a crash.
        raise ParseError(
            file.display, f"not a valid {module.NAME} file ({type(exc).__name__}: {exc})"
        ) from exc
    if not runs:
        raise ParseError(file.display, f"no results found for format {module.NAME}")
    used = [file.display] + [str(p) for p in recorder.read_paths if p != file.path]
    # one file's bytes at a time: the companions are read again, each hashed and let go
    digest = content_digest(
        itertools.chain([file.data], (tree.read(p) or b"" for p in recorder.read_paths if p != file.path))
    )
    for run in runs:
        run.files = list(used)
        run.content_sha256 = digest
        _finalise(run, file.path, context)
    return runs


def content_digest(contents: Iterable[bytes]) -> str:
    """What a run was read from, by content only: the sha256 of its one file, or of its files'
    sorted digests. Names, folders and archives are left out, so loose files, a folder and an
    archive of the same result give the same digest (``import_services`` keys a run on it)."""
    digests = sorted(hashlib.sha256(data).hexdigest() for data in contents)
    if len(digests) == 1:
        return digests[0]
    return hashlib.sha256("\n".join(digests).encode()).hexdigest()


def _walk(
    tree: Tree,
    name: str,
    module: ModuleType | None,
    context: dict[str, Any],
    *,
    strict: bool,
    report_skipped: bool = True,
) -> Submission:
    """Every result in a tree, each file parsed once: a file that a run reads (or claims as a
    companion) is part of that run, not a run of its own. ``strict`` (a directory or an archive)
    raises the first error and ignores files that are not results; otherwise each failed or
    unused file becomes an error of its own, and so does each unrecognised one when
    ``report_skipped`` (files named one by one, not a folder's content)."""
    # Paths, not files: a file is read again when its turn comes, so that memory holds one file
    # at a time, not every result of an archive at once.
    found: list[tuple[tuple[int, int, str], PurePosixPath, ModuleType]] = []
    auxiliary: dict[PurePosixPath, tuple[str, str]] = {}
    skipped: list[str] = []
    result = Submission()
    for path in tree.files():
        try:
            found_one = _classify(
                tree, path, module, auxiliary, skipped, forcing=report_skipped and not strict
            )
        except ParseError as exc:  # too large to read (``inputs.check_cost``)
            if strict:
                raise
            result.errors.append(exc)
            continue
        if found_one is not None:
            found.append(found_one)
    consumed: set[PurePosixPath] = set()
    for _order, path, matched in sorted(found, key=lambda item: item[0]):
        if path in consumed:
            continue
        file = tree.open(path)
        if file is None:
            continue
        companions = getattr(matched, "companions", None)
        if companions is not None:
            consumed.update(companions(file, tree))
        try:
            runs = _parse_file(file, tree, matched, context)
        except (ParseError, UnrecognisedFormat) as exc:
            if strict:
                raise
            result.errors.append(exc)
            continue
        for run in runs:
            consumed.update(PurePosixPath(used) for used in run.files)
        result.runs.extend(runs)
    tried = [module.NAME] if module is not None else list(TRIED)
    if strict:
        if not result.runs:
            raise UnrecognisedFormat(name, tried, hint=f"none of its {len(skipped)} files was recognised")
        return result
    for path, (display, what) in auxiliary.items():
        if path not in consumed:
            result.errors.append(
                ParseError(
                    display, f"{what}: no result file given with it uses it; give the result files too"
                )
            )
    if report_skipped:
        result.errors.extend(UnrecognisedFormat(display, tried) for display in skipped)
    return result


def _classify(
    tree: Tree,
    path: PurePosixPath,
    module: ModuleType | None,
    auxiliary: dict[PurePosixPath, tuple[str, str]],
    skipped: list[str],
    *,
    forcing: bool,
) -> tuple[tuple[int, int, str], PurePosixPath, ModuleType] | None:
    """A walk's first look at one file (read, sniffed, let go): its place in the walk when it is
    a result; otherwise it is noted in ``auxiliary`` or ``skipped``. ``forcing``: files named one
    by one are read as the format asked for, unless they describe a run."""
    file = tree.open(path)
    if file is None:
        return None
    described = None
    if module is not None:
        forced = forcing and (described := _auxiliary(file, module)) is None
        matched = module if forced or module.sniff(file) else None
    else:
        detected = _sniff(file)
        matched = FORMATS[detected] if detected else None
    if matched is None:
        described = described or _auxiliary(file, module)
        if described is not None:
            auxiliary[path] = (file.display, described[1])
        else:
            skipped.append(file.display)
        return None
    rank = getattr(matched, "priority", _priority)(file)
    return (_MODULES.index(matched), rank, str(file.path)), file.path, matched


def _priority(file: InputFile) -> int:
    # Within one format, files that carry more (MLPerf detail logs) go first.
    return 0 if "detail" in file.name else 1


def _finalise(run: ParsedRun, path: PurePosixPath, context: dict[str, Any]) -> None:
    _model_name_hints(run)
    if not run.hardware.accelerator:
        for part in reversed(path.parts[:-1]):
            accelerator, count = accelerator_from_text(part)
            if accelerator:
                run.put("hardware.accelerator", accelerator, "path")
                run.fill("hardware.count", count, "path")
                break
    context_apply(run, context)
    problem = hostname_problem(run.hardware.host)
    if problem is not None:  # read from the file (the uploader's is checked with the context)
        raise ParseError(str(path), f"the host name {problem}", key="hardware.host")
    if run.field_sources.get("model") == "user":
        _model_name_hints(run)  # the uploader's model name, e.g. "...-AWQ", also tells the variant
    run.name_accuracy_task(run.model or run.source_format)
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


def _model_name_hints(run: ParsedRun) -> None:
    """Precision and quantisation from the model's name (``-FP8``, ``-AWQ``, ``-GPTQ-Int8``) where
    the file did not state them, and the raw name split into base and suffix for a catalogue."""
    if not run.model:
        return
    base, suffix = split_model_name(run.model)
    if suffix:
        run.put("model_base", base, "model-name")
        run.put("model_suffix", suffix, "model-name")
    precision, method = hints_from_model_name(run.model)
    stated, _ = hints_from_model_name(run.model, explicit=True)
    for path, hinted, check in (
        ("variant.precision", precision, stated),
        ("variant.quantization_method", method, method),
    ):
        current = run.get(path)
        if not run.fill(path, hinted, "model-name") and check and current and not _same(current, check):
            run.warnings.append(
                f"{path}: the model name {run.model!r} says {check!r}, the file says {current!r} "
                f"({run.field_sources.get(path, '?')}); kept the file's value"
            )


def context_apply(
    run: ParsedRun, context: dict[str, Any], *, who: str = "the context", replace: bool = False
) -> None:
    """Fill the run's empty fields from normalised ``key=value`` context (marked ``user``); a value
    the file already has is kept, and a disagreement becomes a warning naming both sides. With
    ``replace`` (an upload form's fields) the uploader's value applies instead, also with a warning
    naming what the file said."""
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
        elif _same(current, value):
            continue
        elif replace:
            run.warnings.append(
                f"{field_path}: the file says {current!r} ({run.field_sources.get(field_path, '?')}); "
                f"{who}'s {value!r} applies"
            )
            run.put(field_path, value, "user")
        else:
            run.warnings.append(
                f"{field_path}: the file says {current!r} ({run.field_sources.get(field_path, '?')}), "
                f"{who} says {value!r}; kept the file's value"
            )


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(float(a), float(b))
    return str(a).strip().lower() == str(b).strip().lower()
