"""A protobuf ``prometheus.WriteRequest`` encoder for tests: the bytes a sender would produce,
written from remote.proto/types.proto independently of the reader under test."""

from __future__ import annotations

import struct

import cramjam

STALE_NAN = struct.unpack("<d", struct.pack("<Q", 0x7FF0000000000002))[0]


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _delimited(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _sample(value: float, ms: int) -> bytes:
    bits = struct.pack("<d", value)  # a NaN keeps its payload: the stale marker is one NaN among many
    return _varint(1 << 3 | 1) + bits + _varint(2 << 3 | 0) + _varint(ms)


def write_request(
    series: list[tuple[dict[str, str], list[tuple[int, float]]]], *, extras: bool = False
) -> bytes:
    """``series``: (labels, [(ms, value)]). ``extras``: add an exemplar, a histogram field and
    metadata, which the reader must skip."""
    out = bytearray()
    for labels, samples in series:
        body = bytearray()
        for name, value in labels.items():
            body += _delimited(1, _delimited(1, name.encode()) + _delimited(2, value.encode()))
        for ms, value in samples:
            body += _delimited(2, _sample(value, ms))
        if extras:
            body += _delimited(3, _delimited(1, _delimited(1, b"trace_id") + _delimited(2, b"abc")))
            body += _delimited(4, _varint(1 << 3 | 0) + _varint(5))
        out += _delimited(1, bytes(body))
    if extras:
        out += _delimited(3, _varint(1 << 3 | 0) + _varint(1) + _delimited(2, b"DCGM_FI_DEV_GPU_UTIL"))
    return bytes(out)


def snappy(data: bytes) -> bytes:
    return bytes(cramjam.snappy.compress_raw(data))
