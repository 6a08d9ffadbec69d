"""MLPerf Power: the mean of ``spl.txt`` Watts samples inside the run's window, and what follows.

Mean Watts of the samples between the detail log's ``power_begin`` and ``power_end``; energy =
mean W x window; efficiency = samples/s / W for Offline and Server, energy per query = W / QPS for
the stream scenarios, energy per token = W / tokens/s for LLMs.
"""

from __future__ import annotations

from datetime import datetime

from .base import ParsedRun, ParseError
from .inputs import InputFile
from .units import UnitError, to_float

_STREAM = {"single-stream", "multi-stream"}


_POWER_TIME = "%m-%d-%Y %H:%M:%S.%f"


def apply_power(run: ParsedRun, file: InputFile) -> None:
    times: list[datetime] = []
    watts: list[float] = []
    for number, line in enumerate(file.text().splitlines(), start=1):
        if not line.strip():
            continue
        cells = [cell.strip() for cell in line.split(",")]
        fields = dict(zip(cells[0::2], cells[1::2], strict=False))
        try:
            times.append(datetime.strptime(fields["Time"], _POWER_TIME))
            value = to_float(fields["Watts"])
        except (KeyError, ValueError, UnitError) as exc:
            raise ParseError(
                file.display, f"expected 'Time,<MM-DD-YYYY hh:mm:ss.fff>,Watts,<W>,...' ({exc})", line=number
            ) from exc
        watts.append(value if value is not None else float("nan"))
    begin, end = run.context.get("power_begin"), run.context.get("power_end")
    window = list(zip(times, watts, strict=True))
    if begin and end:
        start, stop = datetime.strptime(str(begin), _POWER_TIME), datetime.strptime(str(end), _POWER_TIME)
        window = [(t, w) for t, w in window if start <= t <= stop and w == w]
        duration_s = (stop - start).total_seconds()
    else:
        run.warnings.append(f"{file.name}: no power_begin/power_end in a detail log: averaged every sample")
        window = [(t, w) for t, w in window if w == w]
        duration_s = (times[-1] - times[0]).total_seconds() if len(times) > 1 else 0.0
    if not window:
        run.warnings.append(f"{file.name}: no power sample inside the run's window")
        return
    values = [w for _, w in window]
    mean_w = sum(values) / len(values)
    source = f"file:{file.name}:Watts[{len(values)} samples]"
    run.add_metric("power_avg_w", mean_w, source=source, samples=values, raw_unit="W")
    run.add_metric("power_max_w", max(values), source=source, raw_unit="W")
    if duration_s > 0:
        run.add_metric("energy_j", mean_w * duration_s, source="derived:power_avg_w*(power_end-power_begin)")
    samples = run.metric("throughput_samples_per_s")
    tokens = run.metric("throughput_tokens_per_s")
    if run.workload.scenario in _STREAM:
        qps = to_float(run.context.get("result_qps_with_loadgen_overhead"))
        if qps:
            run.add_metric(
                "energy_per_inference_j", mean_w / qps, source="derived:power_avg_w/qps_with_loadgen_overhead"
            )
    elif samples is not None and samples.value > 0:
        run.add_metric(
            "samples_per_j", samples.value / mean_w, source="derived:throughput_samples_per_s/power_avg_w"
        )
        run.add_metric(
            "energy_per_inference_j",
            mean_w / samples.value,
            source="derived:power_avg_w/throughput_samples_per_s",
        )
    if tokens is not None and tokens.value > 0:
        run.add_metric(
            "energy_per_token_j", mean_w / tokens.value, source="derived:power_avg_w/throughput_tokens_per_s"
        )
