"""A librdkafka producer driven through ctypes, for tests that read a message's persistence status.

confluent-kafka's `Message` does not expose `rd_kafka_message_status()` (NOT_PERSISTED,
POSSIBLY_PERSISTED, PERSISTED: KIP-98-era librdkafka's answer to "could this message be in the
log?"), so this drives the librdkafka copy bundled with confluent-kafka directly: the same
library, the same producer code paths, with the status read in the delivery report callback.

    with StatusProducer({"bootstrap.servers": ...}, "topic") as producer:
        producer.produce(b"payload")
        reports = producer.flush(10.0)   # {payload: Report(error_name, status)}
"""

from __future__ import annotations

import ctypes
import glob
import os
from dataclasses import dataclass
from typing import Any

import confluent_kafka

NOT_PERSISTED = "NOT_PERSISTED"
POSSIBLY_PERSISTED = "POSSIBLY_PERSISTED"
PERSISTED = "PERSISTED"
_STATUS = {0: NOT_PERSISTED, 1: POSSIBLY_PERSISTED, 2: PERSISTED}
_PRODUCER = 0
_MSG_F_COPY = 2


class _Message(ctypes.Structure):
    """rd_kafka_message_t's public fields (rdkafka.h)."""

    _fields_ = [
        ("err", ctypes.c_int),
        ("rkt", ctypes.c_void_p),
        ("partition", ctypes.c_int32),
        ("payload", ctypes.c_void_p),
        ("len", ctypes.c_size_t),
        ("key", ctypes.c_void_p),
        ("key_len", ctypes.c_size_t),
        ("offset", ctypes.c_int64),
        ("_private", ctypes.c_void_p),
    ]


_DeliveryCallback = ctypes.CFUNCTYPE(
    None, ctypes.c_void_p, ctypes.POINTER(_Message), ctypes.c_void_p
)


def _load() -> Any:
    package = os.path.dirname(confluent_kafka.__file__)
    found = sorted(
        glob.glob(os.path.join(os.path.dirname(package), "confluent_kafka.libs", "librdkafka*.so*"))
    )
    lib = ctypes.CDLL(found[0] if found else "librdkafka.so.1")
    vp, cp = ctypes.c_void_p, ctypes.c_char_p
    lib.rd_kafka_conf_new.restype = vp
    lib.rd_kafka_conf_set.argtypes = [vp, cp, cp, cp, ctypes.c_size_t]
    lib.rd_kafka_conf_set_dr_msg_cb.argtypes = [vp, _DeliveryCallback]
    lib.rd_kafka_new.restype = vp
    lib.rd_kafka_new.argtypes = [ctypes.c_int, vp, cp, ctypes.c_size_t]
    lib.rd_kafka_topic_new.restype = vp
    lib.rd_kafka_topic_new.argtypes = [vp, cp, vp]
    lib.rd_kafka_produce.argtypes = [
        vp,
        ctypes.c_int32,
        ctypes.c_int,
        cp,
        ctypes.c_size_t,
        vp,
        ctypes.c_size_t,
        vp,
    ]
    lib.rd_kafka_poll.argtypes = [vp, ctypes.c_int]
    lib.rd_kafka_flush.argtypes = [vp, ctypes.c_int]
    lib.rd_kafka_outq_len.argtypes = [vp]
    lib.rd_kafka_message_status.argtypes = [vp]
    lib.rd_kafka_err2name.restype = cp
    lib.rd_kafka_topic_destroy.argtypes = [vp]
    lib.rd_kafka_destroy.argtypes = [vp]
    return lib


@dataclass(frozen=True)
class Report:
    """One delivery report: librdkafka's error name ("NO_ERROR", "_MSG_TIMED_OUT") and status."""

    error: str
    status: str


class StatusProducer:
    """A librdkafka producer of one topic whose delivery reports carry the message status."""

    def __init__(self, config: dict[str, object], topic: str) -> None:
        self._lib = _load()
        self.reports: dict[bytes, Report] = {}
        conf = self._lib.rd_kafka_conf_new()
        err = ctypes.create_string_buffer(512)
        for key, value in config.items():
            if self._lib.rd_kafka_conf_set(conf, key.encode(), str(value).encode(), err, 512) != 0:
                raise ValueError(f"{key}: {err.value.decode()}")
        self._callback = _DeliveryCallback(self._on_delivery)  # kept alive with the producer
        self._lib.rd_kafka_conf_set_dr_msg_cb(conf, self._callback)
        self._rk = self._lib.rd_kafka_new(_PRODUCER, conf, err, 512)
        if not self._rk:
            raise RuntimeError(err.value.decode())
        self._rkt = self._lib.rd_kafka_topic_new(self._rk, topic.encode(), None)

    def _on_delivery(self, _rk: int, message: Any, _opaque: int) -> None:
        msg = message.contents
        payload = ctypes.string_at(msg.payload, msg.len)
        status = self._lib.rd_kafka_message_status(ctypes.cast(message, ctypes.c_void_p))
        self.reports[payload] = Report(
            self._lib.rd_kafka_err2name(msg.err).decode(), _STATUS[status]
        )

    def produce(self, payload: bytes, partition: int = 0) -> None:
        rc = self._lib.rd_kafka_produce(
            self._rkt, partition, _MSG_F_COPY, payload, len(payload), None, 0, None
        )
        if rc != 0:
            raise RuntimeError(f"rd_kafka_produce failed ({rc})")

    def poll(self, timeout: float) -> None:
        self._lib.rd_kafka_poll(self._rk, int(timeout * 1000))

    def flush(self, timeout: float) -> dict[bytes, Report]:
        """Wait (at most `timeout` s) until every message has its delivery report."""
        self._lib.rd_kafka_flush(self._rk, int(timeout * 1000))
        return dict(self.reports)

    def close(self) -> None:
        if self._rk:
            self._lib.rd_kafka_topic_destroy(self._rkt)
            self._lib.rd_kafka_destroy(self._rk)
            self._rk = None

    def __enter__(self) -> StatusProducer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
