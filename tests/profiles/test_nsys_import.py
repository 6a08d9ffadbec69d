"""nsys stats CSV reports: one file per report, several on standard output, and a GPU trace."""

from __future__ import annotations

import pytest

from accelboard.importers import nsys
from accelboard.importers.base import ParseError
from accelboard.importers.profile_registry import profile_detect, profile_parse
from accelboard.profiles.analysis import profile_analyse

KERN_SUM = """Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name
60.0,6000000,100,60000.0,60000.0,50000,70000,100.0,"void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8>(T1::Params)"
30.0,3000000,1000,3000.0,3000.0,2000,4000,10.0,"void at::native::vectorized_elementwise_kernel<(int)4, at::native::BinaryFunctor<float, float, float, at::native::MulFunctor<float>>, std::array<char *, (unsigned long)3>>(int, T2, T3)"
10.0,1000000,10,100000.0,100000.0,90000,110000,5.0,"ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm *, unsigned long, ncclWork *)"
"""
MEM_SUM = """Time (%),Total Time (ns),Count,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Operation
80.0,800000,4,200000.0,200000.0,190000,210000,10.0,[CUDA memcpy Host-to-Device]
20.0,200000,20,10000.0,10000.0,9000,11000,1.0,[CUDA memset]
"""
API_SUM = """Time (%),Total Time (ns),Num Calls,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name
90.0,5550000,1110,5000.0,5000.0,4000,6000,1.0,cudaLaunchKernel
10.0,600000,4,150000.0,150000.0,1,2,0.0,cudaMemcpyAsync
"""


def test_it_reads_reports_from_separate_files() -> None:
    data = profile_parse(
        [
            ("run_cuda_gpu_kern_sum.csv", KERN_SUM.encode()),
            ("run_cuda_gpu_mem_time_sum.csv", MEM_SUM.encode()),
            ("run_cuda_api_sum.csv", API_SUM.encode()),
        ]
    )
    assert data.source_format == "nsys-stats"
    summary = profile_analyse(data)
    c = summary["totals"]["categories"]
    assert c["gemm"] == 6000.0 and c["elementwise"] == 3000.0 and c["communication"] == 1000.0
    assert c["memcpy_htod"] == 800.0 and c["memset"] == 200.0 and c["idle"] is None
    assert summary["totals"]["busy_us"] == 11000.0
    assert summary["timeline"] is False and summary["totals"]["span_us"] is None
    assert summary["totals"]["launch_us_mean"] == 5.0
    assert summary["kernels"][0]["precision"] == "bf16" and summary["kernels"][0]["count"] == 100
    assert "no timeline" in " ".join(summary["verdict"]["details"])


def test_it_reads_several_reports_printed_one_after_another() -> None:
    text = (
        "Generating SQLite file report.sqlite from report.nsys-rep\n"
        "Processing [report.sqlite] with [cuda_gpu_kern_sum.py]... \n\n"
        " ** CUDA GPU Kernel Summary (cuda_gpu_kern_sum):\n\n" + KERN_SUM + "\n"
        " ** CUDA GPU MemOps Summary (by Time) (cuda_gpu_mem_time_sum):\n\n" + MEM_SUM
    )
    assert profile_detect(text.encode()) == "nsys-stats"
    summary = profile_analyse(profile_parse([("stats.txt", text.encode())]))
    assert summary["totals"]["busy_us"] == 11000.0


def test_a_gpu_trace_report_gives_a_timeline() -> None:
    trace = (
        "Start (ns),Duration (ns),CorrId,GrdX,GrdY,GrdZ,BlkX,BlkY,BlkZ,Reg/Trd,StcSMem (MB),DymSMem (MB),Bytes (MB),Throughput (MB/s),SrcMemKd,DstMemKd,Device,Ctx,Strm,Name\n"
        "1000,100000,1,1,1,1,1,1,1,32,0,0,,,,,NVIDIA H100 (0),1,7,ampere_bf16_s16816gemm_bf16_128x128\n"
        "50000,150000,2,1,1,1,1,1,1,32,0,0,,,,,NVIDIA H100 (0),1,20,ncclDevKernel_AllReduce_Sum_bf16_RING_LL\n"
        "301000,10000,3,,,,,,,,,,4.194,400.0,Pinned,Device,NVIDIA H100 (0),1,7,[CUDA memcpy Host-to-Device]\n"
    )
    summary = profile_analyse(profile_parse([("r_cuda_gpu_trace.csv", trace.encode())]))
    rank = summary["ranks"][0]
    assert summary["timeline"] is True
    assert rank["span_us"] == 310.0
    assert rank["categories"]["gemm"] == 100.0 and rank["categories"]["communication"] == 99.0
    assert rank["categories"]["idle"] == 101.0 and rank["categories"]["memcpy_htod"] == 10.0
    assert rank["overlap_us"] == 51.0


def test_it_names_the_file_and_line_of_a_bad_value() -> None:
    bad = KERN_SUM.replace("100,60000.0", "lots,60000.0")
    with pytest.raises(ParseError, match=r"k_cuda_gpu_kern_sum.csv:2: column 'instances'"):
        nsys.parse([("k_cuda_gpu_kern_sum.csv", bad.encode())])
    with pytest.raises(ParseError, match="no nsys stats report"):
        nsys.parse([("empty.csv", b"a,b\n1,2\n")])


def test_a_report_with_a_header_and_no_rows_is_refused_not_read_as_no_activity() -> None:
    header_only = KERN_SUM.splitlines()[0] + "\n"
    with pytest.raises(
        ParseError, match=r"k_cuda_gpu_kern_sum.csv:1: the cuda_gpu_kern_sum report has a header but no rows"
    ):
        profile_parse([("k_cuda_gpu_kern_sum.csv", header_only.encode())])
    # Among other reports too: the cut-short one is named.
    with pytest.raises(
        ParseError, match=r"m.csv:1: the cuda_gpu_mem_time_sum report has a header but no rows"
    ):
        profile_parse(
            [("k_cuda_gpu_kern_sum.csv", KERN_SUM.encode()), ("m.csv", MEM_SUM.splitlines()[0].encode())]
        )


def test_a_gpu_trace_beyond_the_activity_limit_is_refused_naming_the_file(monkeypatch) -> None:
    from accelboard.importers import profile_data

    header = "Start (ns),Duration (ns),CorrId,Strm,Name\n"
    rows = "".join(f"{1000 * i},500,{i},7,kernel_{i % 3}\n" for i in range(1, 6))
    source = [("r_cuda_gpu_trace.csv", (header + rows).encode())]
    monkeypatch.setattr(profile_data, "MAX_ACTIVITIES", 5)
    assert len(profile_parse(source).ranks[0].events or []) == 5
    monkeypatch.setattr(profile_data, "MAX_ACTIVITIES", 4)
    with pytest.raises(profile_data.TooLarge) as refused:
        profile_parse(source)
    assert refused.value.code == "too_large" and refused.value.file == "r_cuda_gpu_trace.csv"
    assert "more than 4 GPU activities" in str(refused.value)
