"""The normalised shape every importer produces, and the errors it raises.

A ``ParsedRun`` is close to the body of ``POST /api/v1/runs`` (docs/api-contract.md) plus what an
importer knows on top: where each field came from (``field_sources``), the tool's format, warnings,
accuracy results and telemetry rows. Nothing here touches the database: a run is plain data that a
service may later store, and ``to_dict`` gives the JSON that ``accelboard parse`` prints.

Field sources are strings: ``file:<name>:<line or key>`` (read from a file), ``path`` (read from
the file's directory names), ``model-name`` (inferred from the model's name, e.g. ``-FP8``),
``user`` (stated by the uploader in the context) and ``derived:<how>`` (computed from other fields).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from .metrics import metric_spec


class ParseError(ValueError):
    """A file that claims a format but breaks it: names the file, the line or key, and what is wrong."""

    def __init__(self, file: str, message: str, *, line: int | None = None, key: str | None = None):
        self.file = file
        self.line = line
        self.key = key
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        where = self.file
        if self.line is not None:
            where += f":{self.line}"
        if self.key is not None:
            where += f": key {self.key!r}"
        return f"{where}: {self.message}"


class UnrecognisedFormat(ValueError):
    """No importer recognised the content; ``tried`` lists the formats that were checked."""

    def __init__(self, file: str, tried: list[str], hint: str = ""):
        self.file = file
        self.tried = list(tried)
        self.hint = hint
        super().__init__(str(self))

    def __str__(self) -> str:
        text = f"{self.file}: unrecognised format (tried: {', '.join(self.tried)})"
        return f"{text}; {self.hint}" if self.hint else text


@dataclass
class Metric:
    name: str
    value: float
    unit: str
    direction: str
    samples: list[float] = field(default_factory=list)
    raw_value: str = ""
    raw_unit: str = ""
    source: str = ""


@dataclass
class Variant:
    name: str = ""
    precision: str = ""
    quantization_method: str = ""


@dataclass
class Workload:
    scenario: str = ""
    batch_size: int | None = None
    concurrency: int | None = None
    input_length: int | None = None
    output_length: int | None = None
    framework: str = ""
    framework_version: str = ""
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class Hardware:
    accelerator: str = ""
    count: int | None = None
    host: str = ""
    cpu: str = ""
    driver_version: str = ""
    cuda_version: str = ""


@dataclass
class AccuracyResult:
    """One quality figure: an lm-eval task/metric, an MLPerf accuracy.txt entry, a training target."""

    task: str
    metric: str
    value: float
    stderr: float | None = None
    higher_is_better: bool = True
    n_shot: int | None = None
    version: str = ""
    target: str = ""
    source: str = ""
    # ``ratio`` (a proportion normalised to 0-1, whatever scale the tool wrote) or ``score`` (the
    # tool's own unbounded scale: perplexity, loss, FID); ``raw`` is the value as the file wrote it.
    unit: str = "score"
    raw: str = ""


@dataclass
class TelemetryRow:
    """One GPU sample from a log (nvidia-smi CSV). Unknown or unsupported values are None, never 0."""

    time: str | None
    gpu_index: int | None = None
    gpu_name: str = ""
    gpu_uuid: str = ""
    values: dict[str, float | None] = field(default_factory=dict)
    line: int | None = None


@dataclass
class ParsedRun:
    source_format: str
    source_file: str
    # The model and accelerator names exactly as read (``model``, ``hardware.accelerator``): a
    # catalogue resolves them later. ``model_base`` is ``model`` without the precision or
    # quantisation suffix that set the variant (``...-FP8`` -> ``...``), ``model_suffix`` that suffix.
    model: str = ""
    model_base: str = ""
    model_suffix: str = ""
    variant: Variant = field(default_factory=Variant)
    workload: Workload = field(default_factory=Workload)
    hardware: Hardware = field(default_factory=Hardware)
    started_at: str | None = None
    finished_at: str | None = None
    valid: bool = True
    metrics: list[Metric] = field(default_factory=list)
    accuracy: list[AccuracyResult] = field(default_factory=list)
    telemetry: list[TelemetryRow] = field(default_factory=list)
    context: dict[str, Any] = field(default_factory=dict)
    field_sources: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    # Every file the run was read from: its own file first, then the siblings it used; and the
    # digest of their contents alone (``registry.content_digest``), the same whatever the
    # upload's shape (loose files, a folder, an archive).
    files: list[str] = field(default_factory=list)
    content_sha256: str = ""

    # -- fields -------------------------------------------------------------------------------
    def get(self, path: str) -> Any:
        target: Any = self
        for part in path.split("."):
            target = getattr(target, part)
        return target

    def put(self, path: str, value: Any, source: str) -> None:
        """Set a field (``"hardware.accelerator"``) and record where the value came from.

        Empty values (None, "") are ignored so that a missing key never erases a known one."""
        if value is None or value == "":
            return
        *parents, last = path.split(".")
        target: Any = self
        for part in parents:
            target = getattr(target, part)
        setattr(target, last, value)
        self.field_sources[path] = source

    def fill(self, path: str, value: Any, source: str) -> bool:
        """Set a field only when it is still empty (a lower-priority source); True when set."""
        current = self.get(path)
        if current not in (None, "") or value in (None, ""):
            return False
        self.put(path, value, source)
        return True

    # -- metrics ------------------------------------------------------------------------------
    def add_metric(
        self,
        name: str,
        value: float | None,
        *,
        source: str,
        raw_value: Any = None,
        raw_unit: str = "",
        samples: list[float] | None = None,
        unit: str | None = None,
        direction: str | None = None,
    ) -> Metric | None:
        """Add a metric from the catalogue (unit and direction come from it unless given).

        A None or non-finite value is skipped: a gap stays a gap. A second value for the same name
        is a warning, not an overwrite, so the first (preferred) source wins."""
        if value is None or not math.isfinite(value):
            return None
        spec = metric_spec(name)
        if spec is not None:
            unit, direction = unit or spec.unit, direction or spec.direction
        elif unit is None or direction is None:
            raise KeyError(f"metric {name!r} is not in the catalogue; give unit and direction")
        existing = self.metric(name)
        if existing is not None:
            if not _agrees(existing.value, value, raw_value):
                self.warnings.append(
                    f"{name}: kept {existing.value:g} from {existing.source}, ignored {value:g} from {source}"
                )
            return existing
        metric = Metric(
            name=name,
            value=float(value),
            unit=unit,
            direction=direction,
            samples=[float(s) for s in samples] if samples else [],
            raw_value="" if raw_value is None else str(raw_value),
            raw_unit=raw_unit,
            source=source,
        )
        self.metrics.append(metric)
        return metric

    def metric(self, name: str) -> Metric | None:
        return next((m for m in self.metrics if m.name == name), None)

    def name_accuracy_task(self, task: str) -> None:
        """Give accuracy results read before the model was known (task "") their task, and rename
        their metrics ``accuracy::<metric>`` -> ``accuracy:<task>:<metric>``."""
        for result in self.accuracy:
            if not result.task:
                result.task = task
        for metric in self.metrics:
            if metric.name.startswith("accuracy::"):
                metric.name = f"accuracy:{task}:{metric.name.removeprefix('accuracy::')}"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        # Accuracy results and telemetry are only present for the formats that carry them.
        if not self.accuracy:
            data.pop("accuracy")
        if not self.telemetry:
            data.pop("telemetry")
        return data


def _agrees(kept: float, other: float, raw: Any) -> bool:
    """Equal, or equal to the precision ``other`` was written with (a summary's "69.95" agrees with
    a detail log's 69.9459)."""
    if math.isclose(kept, other, rel_tol=1e-6):
        return True
    text = str(raw).strip() if raw is not None else ""
    if "." in text and text.replace(".", "", 1).lstrip("+-").isdigit():
        decimals = len(text.split(".", 1)[1])
        return math.isclose(round(kept, decimals), other, rel_tol=1e-9, abs_tol=10**-decimals / 2)
    return False
