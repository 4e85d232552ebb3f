"""A small reader of OpenTelemetry's OTLP `MetricsData` protobuf (opentelemetry-proto v1), what
KIP-714 clients push in PushTelemetry.

Only the protobuf wire format is needed (varints, 64-bit, length-delimited and 32-bit fields), so
no protobuf package: the messages read are

    MetricsData      1: repeated ResourceMetrics
    ResourceMetrics  1: Resource (1: repeated KeyValue attributes), 2: repeated ScopeMetrics
    ScopeMetrics     1: InstrumentationScope, 2: repeated Metric
    Metric           1: name, 2: description, 3: unit, 5: Gauge, 7: Sum, 9: Histogram,
                     10: ExponentialHistogram, 11: Summary
    Gauge / Summary  1: repeated data points
    Sum              1: repeated NumberDataPoint, 2: aggregation temporality, 3: is_monotonic
    Histogram        1: repeated HistogramDataPoint, 2: aggregation temporality
    NumberDataPoint  7: repeated KeyValue, 3: time_unix_nano, 4: as_double, 6: as_int (sfixed64)
    HistogramDataPoint  9: attributes, 3: time, 4: count, 5: sum
    ExponentialHistogramDataPoint  1: attributes, 3: time, 4: count, 5: sum
    SummaryDataPoint 7: attributes, 3: time, 4: count, 5: sum
    KeyValue         1: key, 2: AnyValue (1 string, 2 bool, 3 int64, 4 double, 7 bytes; arrays
                     and lists rendered as text)

Unknown fields are skipped, as protobuf readers do. Malformed input raises `OtlpError`.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

# AggregationTemporality
TEMPORALITY_UNSPECIFIED, DELTA, CUMULATIVE = 0, 1, 2

GAUGE, SUM, HISTOGRAM, EXP_HISTOGRAM, SUMMARY = (
    "gauge",
    "sum",
    "histogram",
    "exp_histogram",
    ("summary"),
)

_F64 = struct.Struct("<d")
_I64 = struct.Struct("<q")
_U64 = struct.Struct("<Q")


class OtlpError(ValueError):
    """The bytes are not an OTLP MetricsData message."""


@dataclass(slots=True)
class DataPoint:
    attributes: dict[str, str]
    value: float = 0.0  # number points: the value; histograms and summaries: the sum
    count: int | None = None  # histograms and summaries
    time_unix_nano: int = 0


@dataclass(slots=True)
class Metric:
    name: str
    kind: str  # GAUGE, SUM, ...
    description: str = ""
    unit: str = ""
    monotonic: bool = False
    temporality: int = TEMPORALITY_UNSPECIFIED
    points: list[DataPoint] = field(default_factory=list)


@dataclass(slots=True)
class MetricsData:
    resource: dict[str, str]  # the resource attributes of the last ResourceMetrics
    metrics: list[Metric]


def _varint(buf: memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise OtlpError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise OtlpError("varint too long")


def _fields(buf: memoryview) -> Iterator[tuple[int, int, int | memoryview]]:
    """(field number, wire type, value): varints and fixed fields as int, others as bytes."""
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _varint(buf, pos)
        num, wire = key >> 3, key & 7
        if num == 0:
            raise OtlpError("field number 0")
        if wire == 0:
            value, pos = _varint(buf, pos)
            yield num, wire, value
        elif wire == 1:
            if pos + 8 > end:
                raise OtlpError("truncated 64-bit field")
            yield num, wire, _U64.unpack_from(buf, pos)[0]
            pos += 8
        elif wire == 2:
            size, pos = _varint(buf, pos)
            if pos + size > end:
                raise OtlpError("truncated length-delimited field")
            yield num, wire, buf[pos : pos + size]
            pos += size
        elif wire == 5:
            if pos + 4 > end:
                raise OtlpError("truncated 32-bit field")
            yield num, wire, int.from_bytes(buf[pos : pos + 4], "little")
            pos += 4
        else:
            raise OtlpError(f"unsupported wire type {wire}")


def _bytes(value: int | memoryview) -> memoryview:
    if not isinstance(value, memoryview):
        raise OtlpError("expected a length-delimited field")
    return value


def _int(value: int | memoryview) -> int:
    if isinstance(value, memoryview):
        raise OtlpError("expected a scalar field")
    return value


def _text(value: int | memoryview) -> str:
    return bytes(_bytes(value)).decode("utf-8", "replace")


def _f64(value: int | memoryview) -> float:
    return float(_F64.unpack(_U64.pack(_int(value)))[0])


def _signed64(value: int) -> int:
    return int(_I64.unpack(_U64.pack(value & 0xFFFFFFFFFFFFFFFF))[0])


def _any_value(buf: memoryview) -> str:
    out = ""
    for num, _wire, value in _fields(buf):
        if num == 1:
            out = _text(value)
        elif num == 2:
            out = "true" if _int(value) else "false"
        elif num == 3:
            out = str(_signed64(_int(value)))
        elif num == 4:
            out = repr(_f64(value))
        elif num == 5:  # ArrayValue: 1 repeated AnyValue
            out = ",".join(_any_value(_bytes(v)) for n, _w, v in _fields(_bytes(value)) if n == 1)
        elif num == 6:  # KeyValueList: 1 repeated KeyValue
            pairs = [_key_value(_bytes(v)) for n, _w, v in _fields(_bytes(value)) if n == 1]
            out = ",".join(f"{k}={v}" for k, v in pairs)
        elif num == 7:
            out = bytes(_bytes(value)).hex()
    return out


def _key_value(buf: memoryview) -> tuple[str, str]:
    key, val = "", ""
    for num, _wire, value in _fields(buf):
        if num == 1:
            key = _text(value)
        elif num == 2:
            val = _any_value(_bytes(value))
    return key, val


def _number_point(buf: memoryview) -> DataPoint:
    point = DataPoint({})
    for num, _wire, value in _fields(buf):
        if num == 7:
            k, v = _key_value(_bytes(value))
            point.attributes[k] = v
        elif num == 3:
            point.time_unix_nano = _int(value)
        elif num == 4:
            point.value = _f64(value)
        elif num == 6:
            point.value = float(_signed64(_int(value)))
    return point


def _summary_point(buf: memoryview, attributes_field: int) -> DataPoint:
    """HistogramDataPoint (attributes 9), ExponentialHistogramDataPoint (1), SummaryDataPoint
    (7): count (fixed64, 4) and sum (double, 5)."""
    point = DataPoint({}, count=0)
    for num, _wire, value in _fields(buf):
        if num == attributes_field:
            k, v = _key_value(_bytes(value))
            point.attributes[k] = v
        elif num == 3:
            point.time_unix_nano = _int(value)
        elif num == 4:
            point.count = _int(value)
        elif num == 5:
            point.value = _f64(value)
    return point


_POINT_ATTRIBUTES = {HISTOGRAM: 9, EXP_HISTOGRAM: 1, SUMMARY: 7}


def _data(metric: Metric, buf: memoryview) -> None:
    for num, _wire, value in _fields(buf):
        if num == 1:
            if metric.kind in (GAUGE, SUM):
                metric.points.append(_number_point(_bytes(value)))
            else:
                metric.points.append(_summary_point(_bytes(value), _POINT_ATTRIBUTES[metric.kind]))
        elif num == 2 and metric.kind != SUMMARY:
            metric.temporality = _int(value)
        elif num == 3 and metric.kind == SUM:
            metric.monotonic = bool(_int(value))


_KINDS = {5: GAUGE, 7: SUM, 9: HISTOGRAM, 10: EXP_HISTOGRAM, 11: SUMMARY}


def _metric(buf: memoryview) -> Metric:
    metric = Metric("", GAUGE)
    data: memoryview | None = None
    for num, _wire, value in _fields(buf):
        if num == 1:
            metric.name = _text(value)
        elif num == 2:
            metric.description = _text(value)
        elif num == 3:
            metric.unit = _text(value)
        elif num in _KINDS:
            metric.kind = _KINDS[num]
            data = _bytes(value)
    if data is not None:
        _data(metric, data)
    return metric


def decode_metrics_data(data: bytes | bytearray | memoryview) -> MetricsData:
    """Decode a MetricsData message; raises OtlpError for malformed bytes."""
    out = MetricsData({}, [])
    try:
        for num, _wire, rm in _fields(memoryview(data)):
            if num != 1:
                continue
            for rnum, _w, value in _fields(_bytes(rm)):
                if rnum == 1:  # Resource
                    for anum, _w2, kv in _fields(_bytes(value)):
                        if anum == 1:
                            k, v = _key_value(_bytes(kv))
                            out.resource[k] = v
                elif rnum == 2:  # ScopeMetrics
                    for snum, _w2, m in _fields(_bytes(value)):
                        if snum == 2:
                            out.metrics.append(_metric(_bytes(m)))
    except (struct.error, KeyError) as exc:  # pragma: no cover - guarded above
        raise OtlpError(str(exc)) from None
    return out


# -- an encoder, for tests: the same messages written the way clients write them ----------------


def _key(num: int, wire: int) -> bytes:
    return _encode_varint(num << 3 | wire)


def _encode_varint(n: int) -> bytes:
    out = bytearray()
    n &= 0xFFFFFFFFFFFFFFFF
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _ld(num: int, payload: bytes) -> bytes:
    return _key(num, 2) + _encode_varint(len(payload)) + payload


def _kv(key: str, value: str) -> bytes:
    return _ld(1, key.encode()) + _ld(2, _ld(1, value.encode()))


def encode_metrics_data(data: MetricsData) -> bytes:
    """MetricsData as protobuf (gauges, sums, histograms and summaries; count and sum only)."""
    metrics = b""
    for m in data.metrics:
        points = b""
        for p in m.points:
            attrs = p.attributes.items()
            if m.kind in (GAUGE, SUM):
                body = b"".join(_ld(7, _kv(k, v)) for k, v in attrs)
                body += _key(3, 1) + _U64.pack(p.time_unix_nano)
                body += _key(4, 1) + _F64.pack(p.value)
            else:
                body = b"".join(_ld(_POINT_ATTRIBUTES[m.kind], _kv(k, v)) for k, v in attrs)
                body += _key(3, 1) + _U64.pack(p.time_unix_nano)
                body += _key(4, 1) + _U64.pack(p.count or 0)
                body += _key(5, 1) + _F64.pack(p.value)
            points += _ld(1, body)
        if m.kind != SUMMARY and m.temporality:
            points += _key(2, 0) + _encode_varint(m.temporality)
        if m.kind == SUM:
            points += _key(3, 0) + _encode_varint(int(m.monotonic))
        kind_num = {v: k for k, v in _KINDS.items()}[m.kind]
        body = _ld(1, m.name.encode())
        if m.description:
            body += _ld(2, m.description.encode())
        if m.unit:
            body += _ld(3, m.unit.encode())
        metrics += _ld(2, body + _ld(kind_num, points))
    resource = b"".join(_ld(1, _kv(k, v)) for k, v in data.resource.items())
    return _ld(1, _ld(1, resource) + _ld(2, metrics))
