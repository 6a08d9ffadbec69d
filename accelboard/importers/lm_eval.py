"""lm-evaluation-harness results JSON (v0.4.x ``results_<timestamp>.json`` and v0.3).

Accuracy per task and metric: v0.4 keys are ``<metric>,<filter>`` (``acc,none``,
``exact_match,strict-match``) with ``<metric>_stderr,<filter>``; v0.3 keys have no filter. Stderr
may be the string "N/A" (-> None). Fractions of examples (acc, exact_match, f1, ...) are unit
``ratio``, every other metric (perplexity, BLEU) a ``score`` on lm-eval's own scale (``accuracy``). Direction comes from the file's ``higher_is_better`` (perplexity
is lower-is-better). ``n-shot``, ``versions`` and ``limit`` are kept with each result because a
change there invalidates a drift comparison.

Model = ``model_name`` or ``pretrained=`` in ``model_args``; precision = ``model_dtype``,
``model_args`` (``dtype=``, ``load_in_4bit=``, ``autogptq=``, ``quantization=``) or the model id;
hardware from ``pretty_env_info`` (torch collect_env: GPU models, CUDA, driver).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from .accuracy import FRACTION, SCORE, scaled
from .base import AccuracyResult, ParsedRun, ParseError
from .inputs import InputFile, Tree
from .jsonfile import head_text, json_object, load
from .naming import hints_from_model_name, normalise_precision
from .units import UnitError, to_float, to_int

NAME = "lm-eval"
_SKIP = {"alias", "name", "sample_len", "samples", " "}
_MAX_NAME = 60  # MetricValue.name length


def sniff(file: InputFile) -> bool:
    head = head_text(file).lstrip()
    return (
        head.startswith("{")
        and '"results"' in head
        and ('"versions"' in head or '"n-shot"' in head or '"model_args"' in head or '"configs"' in head)
    )


def _model_args(raw: Any) -> dict[str, str]:
    if isinstance(raw, dict):
        return {str(k): str(v) for k, v in raw.items()}
    args: dict[str, str] = {}
    for part in str(raw or "").split(","):
        if "=" in part:
            key, value = part.split("=", 1)
            args[key.strip()] = value.strip()
    return args


def parse(file: InputFile, *, tree: Tree) -> list[ParsedRun]:
    data = load(file)
    if not isinstance(data, dict) or not isinstance(data.get("results"), dict):
        raise ParseError(file.display, "expected an object with a 'results' object", key="results")
    run = ParsedRun(source_format=NAME, source_file=file.display)

    def src(key: str) -> str:
        return f"file:{file.name}:{key}"

    config = json_object(data, "config")
    args = _model_args(config.get("model_args"))
    run.put("model", str(data.get("model_name") or ""), src("model_name"))
    run.fill("model", args.get("pretrained") or args.get("model") or "", src("config.model_args"))
    run.put(
        "variant.precision",
        normalise_precision(str(config.get("model_dtype") or "")),
        src("config.model_dtype"),
    )
    run.fill("variant.precision", normalise_precision(args.get("dtype", "")), src("config.model_args.dtype"))
    if args.get("load_in_4bit", "").lower() == "true":
        run.put("variant.precision", "int4", src("config.model_args.load_in_4bit"))
        run.put("variant.quantization_method", "bitsandbytes", src("config.model_args.load_in_4bit"))
    elif args.get("load_in_8bit", "").lower() == "true":
        run.put("variant.precision", "int8", src("config.model_args.load_in_8bit"))
        run.put("variant.quantization_method", "bitsandbytes", src("config.model_args.load_in_8bit"))
    if args.get("autogptq") and args["autogptq"].lower() != "false":
        run.put("variant.quantization_method", "GPTQ", src("config.model_args.autogptq"))
    if args.get("quantization"):
        precision, method = hints_from_model_name(args["quantization"])
        run.put(
            "variant.quantization_method",
            method or args["quantization"],
            src("config.model_args.quantization"),
        )
        run.put("variant.precision", precision, src("config.model_args.quantization"))
    run.put("workload.framework", "lm-evaluation-harness", src("format"))
    run.put("workload.framework_version", str(data.get("lm_eval_version") or ""), src("lm_eval_version"))
    run.workload.options["backend"] = config.get("model")
    run.workload.options["limit"] = config.get("limit")
    if "num_fewshot" in config:
        run.workload.options["num_fewshot"] = config["num_fewshot"]
    try:
        run.put("workload.batch_size", to_int(config.get("batch_size")), src("config.batch_size"))
    except UnitError:
        run.context["batch_size"] = config.get("batch_size")  # "auto", "auto:4"
    date = data.get("date")
    if isinstance(date, int | float):
        run.put(
            "started_at", datetime.fromtimestamp(date, tz=UTC).isoformat().replace("+00:00", "Z"), src("date")
        )
    _hardware(run, data.get("pretty_env_info"), src("pretty_env_info"))
    if str(config.get("device") or "").startswith("cpu"):
        run.put("hardware.count", 0, src("config.device"))
    for key in ("git_hash", "transformers_version", "model_source", "total_evaluation_time_seconds"):
        if data.get(key) not in (None, ""):
            run.context[key] = data[key]
    for key in ("model_sha", "model_revision", "model_num_parameters", "device"):
        if config.get(key) not in (None, ""):
            run.context[key] = config[key]
    _results(run, file, data)
    if not run.accuracy:
        raise ParseError(file.display, "no numeric metric in 'results'", key="results")
    return [run]


def _results(run: ParsedRun, file: InputFile, data: dict[str, Any]) -> None:
    higher = json_object(data, "higher_is_better")
    n_shot = json_object(data, "n-shot")
    versions = json_object(data, "versions")
    for task, values in data["results"].items():
        if not isinstance(values, dict):
            raise ParseError(file.display, "expected an object of metrics", key=f"results.{task}")
        for key, raw in values.items():
            metric, _, filt = key.partition(",")
            if (
                key in _SKIP
                or metric.endswith("_stderr")
                or isinstance(raw, str | dict | list)
                or raw is None
            ):
                continue
            try:
                value = to_float(raw)
            except UnitError as exc:
                raise ParseError(file.display, str(exc), key=f"results.{task}.{key}") from exc
            if value is None:
                continue
            stderr_key = f"{metric}_stderr,{filt}" if filt else f"{metric}_stderr"
            try:
                stderr = to_float(values.get(stderr_key))
            except UnitError:
                stderr = None
            task_higher = json_object(higher, task)
            is_higher = bool(task_higher.get(metric, "perplexity" not in metric))
            label = metric if filt in ("", "none") else f"{metric},{filt}"
            source = f"file:{file.name}:results.{task}.{key}"
            shots = n_shot.get(task)
            result = scaled(value, FRACTION if _is_proportion(metric) else SCORE, what=f"{task} {label}")
            if result.warning:
                run.warnings.append(result.warning)
            run.accuracy.append(
                AccuracyResult(
                    task=task,
                    metric=label,
                    value=result.value,
                    stderr=stderr,
                    higher_is_better=is_higher,
                    n_shot=shots if isinstance(shots, int) else None,
                    version=str(versions.get(task, "")),
                    source=source,
                    unit=result.unit,
                    raw=str(raw),
                )
            )
            name = f"accuracy:{task}:{label}"
            if len(name) > _MAX_NAME:
                run.warnings.append(
                    f"{name}: longer than {_MAX_NAME} characters; kept as an accuracy result only"
                )
                continue
            run.add_metric(
                name,
                result.value,
                source=source,
                raw_value=raw,
                raw_unit=result.raw_unit,
                unit=result.unit,
                direction="higher" if is_higher else "lower",
            )


# lm-eval writes these as fractions of the examples (accuracy, exact match, F1, multiple-choice
# scores, IFEval's strict/loose accuracies, pass@k); BLEU/chrF/TER/ROUGE (sacrebleu, 0-100),
# perplexities, bits per byte, MCC and Brier scores keep their own scale.
_PROPORTION = re.compile(
    r"^(acc|acc_norm|acc_mutual_info|exact_match|em|f1|mc1|mc2|contains|pass@\d+"
    r"|prompt_level_(strict|loose)_acc|inst_level_(strict|loose)_acc|.*_acc)$"
)


def _is_proportion(metric: str) -> bool:
    return bool(_PROPORTION.match(metric))


def _hardware(run: ParsedRun, info: Any, source: str) -> None:
    if not isinstance(info, str):
        return
    gpus = re.findall(r"GPU \d+: (.+)", info)
    if not gpus:
        single = re.search(r"GPU models and configuration:\s*(.+)", info)
        gpus = (
            [single.group(1).strip()]
            if single and "No CUDA" not in single.group(1) and single.group(1).strip()
            else []
        )
    if gpus:
        run.put("hardware.accelerator", gpus[0].strip(), source)
        run.put("hardware.count", len(gpus), source)
    if cuda := re.search(r"CUDA used to build PyTorch:\s*([\d.]+)", info):
        run.put("hardware.cuda_version", cuda.group(1), source)
    if driver := re.search(r"Nvidia driver version:\s*([\d.]+)", info):
        run.put("hardware.driver_version", driver.group(1), source)
    if cpu := re.search(r"Model name:\s*(.+)", info):
        run.put("hardware.cpu", cpu.group(1).strip(), source)
