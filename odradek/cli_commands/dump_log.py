"""`odradek dump-log --files F`, as kafka-dump-log.sh: a partition's files on disk, read-only.

    .log        one line per batch (offsets, producer, epoch, position, timestamp, size, codec,
                CRC and whether it matches); with --deep-iteration one `|` line per record too,
                with --print-data-log also its key and value (implies --deep-iteration)
    .index      offset: N position: P          (the sparse offset index)
    .timeindex  timestamp: T offset: N         (the time index)
    .txnindex   the aborted transactions of the segment

`--offsets-decoder` prints `__consumer_offsets` keys and values as Kafka's tool does
(`key: {"type":"1","data":{...}} payload: {"version":"3","data":{...}}`), and
`--transaction-log-decoder` those of `__transaction_state`; a tombstone's payload is <DELETE>.
Transaction markers show `endTxnMarker: COMMIT|ABORT coordinatorEpoch: N`.

The batches are walked by `odradek.log.reader.segment_batches` over the segment opened
read-only, decoded by `odradek.wire.records`, and the internal topics' records by the
coordinators' own decoders (`coordinator/group/records.py`, `coordinator/txn/records.py`); the
index entries use the layouts of `odradek.log.offset_index` / `time_index` / `txn_index`.
Nothing is written: files of a running broker can be dumped (an index preallocated by the
active segment stops at its first empty entry, as Kafka's tool does).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
from collections.abc import Callable
from typing import Any

from odradek.cli_commands.output import CliError

CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}
INT32_MAX = 2**31 - 1


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "dump-log",
        help="print log segments, indexes and internal-topic records from disk (kafka-dump-log)",
        description="Print the contents of log files (.log, .index, .timeindex, .txnindex).",
    )
    p.add_argument(
        "--files",
        required=True,
        action="append",
        metavar="FILE[,FILE]",
        help="files to dump: a comma-separated list (repeatable)",
    )
    p.add_argument(
        "--deep-iteration", action="store_true", help="print every record, not only batches"
    )
    p.add_argument(
        "--print-data-log",
        action="store_true",
        help="print record keys and values (implies --deep-iteration)",
    )
    p.add_argument(
        "--offsets-decoder",
        action="store_true",
        help="decode __consumer_offsets records (implies --print-data-log)",
    )
    p.add_argument(
        "--transaction-log-decoder",
        action="store_true",
        help="decode __transaction_state records (implies --print-data-log)",
    )
    p.set_defaults(func=cmd_dump_log)


# -- record parsers (what --print-data-log shows as key and payload) ----------------------------

Parser = Callable[[bytes | None, bytes | None], tuple[str | None, str | None]]


def _compact(data: Any) -> str:
    return json.dumps(data, separators=(",", ":"))


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="backslashreplace")


def plain_parser(key: bytes | None, value: bytes | None) -> tuple[str | None, str | None]:
    """kafka-dump-log's default: key and value as UTF-8 strings, left out when null."""
    return (
        None if key is None else _text(key),
        None if value is None else _text(value),
    )


def _version(data: bytes) -> int:
    from odradek.coordinator.codec import Reader

    return Reader(data).i16()


def offsets_parser(key: bytes | None, value: bytes | None) -> tuple[str | None, str | None]:
    """__consumer_offsets records, as Kafka's OffsetsMessageParser."""
    from odradek.coordinator.group import records as group_records

    if key is None:
        return None, None
    key_version = _version(key)
    decoded = group_records.decode_key(key)
    if isinstance(decoded, group_records.OffsetKey):
        key_data: Any = {
            "group": decoded.group,
            "topic": decoded.topic,
            "partition": decoded.partition,
        }
    elif isinstance(decoded, group_records.GroupKey):
        key_data = {"group": decoded.group}
    else:
        key_data = "unknown"
    key_text = _compact({"type": str(key_version), "data": key_data})
    if value is None:
        return key_text, "<DELETE>"
    version = _version(value)
    data: Any
    if isinstance(decoded, group_records.OffsetKey):
        v = group_records.decode_offset_value(value)
        data = {"offset": v.offset}
        if version >= 3:
            data["leaderEpoch"] = v.leader_epoch
        data["metadata"] = v.metadata
        data["commitTimestamp"] = v.commit_timestamp
        if version == 1:
            data["expireTimestamp"] = v.expire_timestamp
    elif isinstance(decoded, group_records.GroupKey):
        g = group_records.decode_group_value(value)
        data = {
            "protocolType": g.protocol_type,
            "generation": g.generation,
            "protocol": g.protocol,
            "leader": g.leader,
            "currentStateTimestamp": g.current_state_timestamp,
            "members": [
                {
                    "memberId": m.member_id,
                    "groupInstanceId": m.group_instance_id,
                    "clientId": m.client_id,
                    "clientHost": m.client_host,
                    "rebalanceTimeout": m.rebalance_timeout,
                    "sessionTimeout": m.session_timeout,
                    "subscription": base64.b64encode(m.subscription).decode(),
                    "assignment": base64.b64encode(m.assignment).decode(),
                }
                for m in g.members
            ],
        }
    else:
        data = "unknown"
    return key_text, _compact({"version": str(version), "data": data})


def transaction_log_parser(key: bytes | None, value: bytes | None) -> tuple[str | None, str | None]:
    """__transaction_state records, as Kafka's TransactionLogMessageParser."""
    from odradek.coordinator.txn import records as txn_records

    if key is None:
        return None, None
    tid = txn_records.decode_key(key)
    key_text = _compact(
        {
            "type": str(_version(key)),
            "data": "unknown" if tid is None else {"transactionalId": tid},
        }
    )
    if value is None:
        return key_text, "<DELETE>"
    if tid is None:
        return key_text, _compact({"version": str(_version(value)), "data": "unknown"})
    v = txn_records.decode_value(value)
    data = {
        "producerId": v.producer_id,
        "producerEpoch": v.producer_epoch,
        "transactionTimeoutMs": v.timeout_ms,
        "transactionStatus": v.status,
        "transactionPartitions": None
        if v.partitions is None
        else [{"topic": t, "partitionIds": ids} for t, ids in v.partitions.items()],
        "transactionLastUpdateTimestampMs": v.last_update_ms,
        "transactionStartTimestampMs": v.start_ms,
    }
    return key_text, _compact({"version": str(_version(value)), "data": data})


# -- files -------------------------------------------------------------------------------------


def _base_offset(path: str) -> int:
    stem = os.path.basename(path).split(".", 1)[0]
    try:
        return int(stem)
    except ValueError:
        raise CliError(
            f"{path}: not a segment file (its name must be the 20-digit base offset)"
        ) from None


def _read_bytes(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _sequence(base: int, delta: int) -> int:
    """Kafka's DefaultRecordBatch.incrementSequence: -1 stays, int32 wraps to 0."""
    if base < 0:
        return -1
    return (base + delta) % (INT32_MAX + 1)


def dump_segment(path: str, deep: bool, parser: Parser | None, out: Any) -> None:
    from odradek.log.open_files import SegmentFile
    from odradek.log.reader import DECODE_ERRORS, segment_batches
    from odradek.log.segment import LogSegment
    from odradek.wire.batch import crc_ok
    from odradek.wire.records import decode_records, end_txn_marker

    class ReadOnlySegment(LogSegment):
        """A .log opened read-only: what `segment_batches` reads, without the indexes a
        LogSegment opens (and preallocates) for appending."""

        def __init__(self, file_path: str, base_offset: int) -> None:
            self.path = file_path
            self.base_offset = base_offset
            self._gone = False
            self._file = SegmentFile(file_path, "r")  # closed below
            self.size = os.fstat(self._file.fileno()).st_size

        def close(self) -> None:
            self.file.close()

    seg = ReadOnlySegment(path, _base_offset(path))
    try:
        print(f"Log starting offset: {seg.base_offset}", file=out)
        end = 0
        for batch in segment_batches([seg]):
            data = batch.read()
            h = batch.header()
            end = batch.position + batch.size
            horizon = (
                f"OptionalLong[{h.base_timestamp}]"
                if h.has_delete_horizon
                else ("OptionalLong.empty")
            )
            ts_type = TIMESTAMP_TYPES.get(h.timestamp_type, str(h.timestamp_type))
            print(
                f"baseOffset: {h.base_offset} lastOffset: {batch.last_offset} "
                f"count: {h.records_count} baseSequence: {h.base_sequence} "
                f"lastSequence: {_sequence(h.base_sequence, h.last_offset_delta)} "
                f"producerId: {h.producer_id} producerEpoch: {h.producer_epoch} "
                f"partitionLeaderEpoch: {h.partition_leader_epoch} "
                f"isTransactional: {_java_bool(h.is_transactional)} "
                f"isControl: {_java_bool(h.is_control)} deleteHorizonMs: {horizon} "
                f"position: {batch.position} {ts_type}: {h.max_timestamp} size: {batch.size} "
                f"magic: {h.magic} compresscodec: {CODEC_NAMES.get(h.compression, h.compression)} "
                f"crc: {h.crc} isvalid: {_java_bool(crc_ok(data, 0, h))}",
                file=out,
            )
            if not deep:
                continue
            try:
                _, records = decode_records(data)
            except DECODE_ERRORS as exc:
                print(f"| cannot decode the records of this batch: {exc}", file=out)
                continue
            marker = end_txn_marker(records) if h.is_control else None
            for r in records:
                line = (
                    f"| offset: {r.offset} {ts_type}: {r.timestamp} "
                    f"keySize: {-1 if r.key is None else len(r.key)} "
                    f"valueSize: {-1 if r.value is None else len(r.value)} "
                    f"sequence: {_sequence(h.base_sequence, r.offset - h.base_offset)} "
                    f"headerKeys: [{','.join(k for k, _ in r.headers)}]"
                )
                if h.is_control:
                    if marker is not None:
                        kind = "COMMIT" if marker[0] == 1 else "ABORT"
                        line += f" endTxnMarker: {kind} coordinatorEpoch: {marker[1]}"
                elif parser is not None:
                    try:
                        key, payload = parser(r.key, r.value)
                    except DECODE_ERRORS as exc:
                        key, payload = None, f"<cannot decode: {exc}>"
                    if key is not None:
                        line += f" key: {key}"
                    if payload is not None:
                        line += f" payload: {payload}"
                print(line, file=out)
        if end < seg.size:
            print(
                f"Found {seg.size - end} invalid bytes at the end of {os.path.basename(path)}",
                file=out,
            )
    finally:
        seg.close()


def dump_offset_index(path: str, out: Any) -> None:
    from odradek.log.offset_index import _ENTRY

    base = _base_offset(path)
    data = _read_bytes(path)
    for i in range(len(data) // _ENTRY.size):
        relative, position = _ENTRY.unpack_from(data, i * _ENTRY.size)
        if relative == 0 and i > 0:  # the preallocated, still empty tail
            return
        print(f"offset: {base + relative} position: {position}", file=out)


def dump_time_index(path: str, out: Any) -> None:
    from odradek.log.time_index import _ENTRY

    base = _base_offset(path)
    data = _read_bytes(path)
    for i in range(len(data) // _ENTRY.size):
        timestamp, relative = _ENTRY.unpack_from(data, i * _ENTRY.size)
        if relative == 0 and i > 0:
            return
        print(f"timestamp: {timestamp} offset: {base + relative}", file=out)


def dump_txn_index(path: str, out: Any) -> None:
    from odradek.log.txn_index import _ENTRY

    data = _read_bytes(path)
    for pos in range(0, len(data) - len(data) % _ENTRY.size, _ENTRY.size):
        version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
        print(
            f"version: {version} producerId: {pid} firstOffset: {first} "
            f"lastOffset: {last} lastStableOffset: {lso}",
            file=out,
        )


def _java_bool(v: bool) -> str:
    return "true" if v else "false"


def cmd_dump_log(args: argparse.Namespace) -> int:
    files = [f.strip() for item in args.files for f in item.split(",") if f.strip()]
    if args.offsets_decoder and args.transaction_log_decoder:
        print(
            "odradek: give one of --offsets-decoder and --transaction-log-decoder", file=sys.stderr
        )
        return 1
    parser: Parser | None = None
    if args.offsets_decoder:
        parser = offsets_parser
    elif args.transaction_log_decoder:
        parser = transaction_log_parser
    elif args.print_data_log:
        parser = plain_parser
    deep = args.deep_iteration or parser is not None
    out = sys.stdout
    status = 0
    for path in files:
        try:
            if not os.path.isfile(path):
                raise CliError(f"{path}: no such file")
            print(f"Dumping {path}", file=out)
            if path.endswith(".log"):
                dump_segment(path, deep, parser, out)
            elif path.endswith(".index"):
                dump_offset_index(path, out)
            elif path.endswith(".timeindex"):
                dump_time_index(path, out)
            elif path.endswith(".txnindex"):
                dump_txn_index(path, out)
            else:
                print(f"Ignoring unknown file {path}", file=out)
        except CliError as exc:
            print(f"odradek: {exc}", file=sys.stderr)
            status = 1
        except BrokenPipeError:  # `odradek dump-log ... | head`
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 0
        except OSError as exc:
            print(f"odradek: {path}: {exc.strerror or exc}", file=sys.stderr)
            status = 1
    return status
