"""The native driver: bench/native/odradek_perf.c, a producer and consumer written against
librdkafka's C API (Debian's librdkafka-dev), so that the bench's rows measure the broker and not
a Python client (issue 17).

`ensure_built()` compiles it into bench/native/build/ (git-ignored) when the binary is missing or
older than its source; `python -m bench.native` does just that (scripts/setup.sh and `make bench`
call it). `produce()` and `consume()` run it against a bootstrap address and return the same
PhaseResult as the Python-client workloads (bench.workloads), with p99.9 too.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from bench.workloads import ClientSettings, PhaseError, PhaseResult

SOURCE = Path(__file__).resolve().with_name("odradek_perf.c")
BINARY = SOURCE.parent / "build" / "odradek_perf"
COMPILE_TIMEOUT_S = 120.0
# beyond the phase's own timeout (which the driver enforces): its start and its flush at the end
_EXTRA_WAIT_S = 60.0


class NativeUnavailable(RuntimeError):
    """The native driver cannot be built here (no C compiler or no librdkafka headers)."""


def compiler() -> str | None:
    for name in (os.environ.get("CC", ""), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return name
    return None


def ensure_built() -> Path:
    """The driver's path, compiling it first when missing or older than its source."""
    if BINARY.exists() and BINARY.stat().st_mtime >= SOURCE.stat().st_mtime:
        return BINARY
    cc = compiler()
    if cc is None:
        raise NativeUnavailable("no C compiler (cc/gcc): scripts/setup.sh test installs gcc")
    BINARY.parent.mkdir(parents=True, exist_ok=True)
    tmp = BINARY.with_name(f"{BINARY.name}.{os.getpid()}.tmp")
    cmd = [cc, "-O2", "-Wall", "-o", str(tmp), str(SOURCE), "-lrdkafka"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as exc:
        raise NativeUnavailable(f"{' '.join(cmd)}: {exc}") from exc
    if out.returncode != 0:
        tmp.unlink(missing_ok=True)
        hint = ""
        if "rdkafka.h" in out.stderr:
            hint = " (install Debian's librdkafka-dev: scripts/setup.sh test does)"
        raise NativeUnavailable(f"compiling {SOURCE.name} failed{hint}:\n{out.stderr.strip()}")
    os.replace(tmp, BINARY)  # atomic: a concurrent run sees the old binary or the new one
    return BINARY


def _run(args: list[str], timeout_s: float) -> dict[str, object]:
    binary = ensure_built()
    try:
        out = subprocess.run(
            [str(binary), *args], capture_output=True, text=True, timeout=timeout_s + _EXTRA_WAIT_S
        )
    except subprocess.TimeoutExpired as exc:
        raise PhaseError(f"odradek_perf {args[0]}: no result after {timeout_s:.0f} s") from exc
    for line in out.stderr.splitlines()[:10]:
        print(f"bench: native: {line}", file=sys.stderr, flush=True)
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode not in (0, 1) or not lines:
        raise PhaseError(
            f"odradek_perf {args[0]} exited with {out.returncode}: {out.stderr.strip()[-2000:]}"
        )
    result: dict[str, object] = json.loads(lines[-1])
    return result


def _common(settings: ClientSettings, topic: str, records: int) -> list[str]:
    args = [
        "--bootstrap",
        settings.bootstrap,
        "--topic",
        topic,
        "--count",
        str(records),
        "--partitions",
        str(settings.partitions),
        "--timeout",
        str(settings.phase_timeout_s),
    ]
    for key, value in settings.security:
        args += ["-X", f"{key}={value}"]
    return args


def _ms(value: object) -> float | None:
    number = float(value)  # type: ignore[arg-type]
    return None if number < 0 else number


def produce(
    settings: ClientSettings, topic: str, size: int, records: int, rate: float = 0.0
) -> PhaseResult:
    """`records` values of `size` bytes, at full speed or at `rate` bytes/s offered."""
    args = ["produce", *_common(settings, topic, records), "--size", str(size)]
    args += ["--acks", settings.acks, "--linger-ms", str(settings.linger_ms)]
    args += ["--batch-size", str(settings.batch_size), "--rate", str(rate)]
    if settings.compression != "none":
        args += ["-X", f"compression.type={settings.compression}"]
    r = _run(args, settings.phase_timeout_s)
    records_done = int(r["records"])  # type: ignore[call-overload]
    return PhaseResult(
        records=records_done,
        value_bytes=int(r["value_bytes"]),  # type: ignore[call-overload]
        elapsed_s=float(r["elapsed_s"]),  # type: ignore[arg-type]
        errors=int(r["errors"]),  # type: ignore[call-overload]
        client_errors=int(r["client_errors"]),  # type: ignore[call-overload]
        p50_ms=_ms(r["p50_ms"]),
        p99_ms=_ms(r["p99_ms"]),
        p999_ms=_ms(r["p999_ms"]),
        measured_records=records_done,
        measured_bytes=int(r["value_bytes"]),  # type: ignore[call-overload]
    )


def consume(settings: ClientSettings, topic: str, records: int) -> PhaseResult:
    """Read partitions 0..P-1 from the beginning (no group) until `records` arrived."""
    r = _run(["consume", *_common(settings, topic, records)], settings.phase_timeout_s)
    first = float(r["first_record_s"])  # type: ignore[arg-type]
    return PhaseResult(
        records=int(r["records"]),  # type: ignore[call-overload]
        value_bytes=int(r["value_bytes"]),  # type: ignore[call-overload]
        elapsed_s=float(r["elapsed_s"]),  # type: ignore[arg-type]
        errors=int(r["errors"]),  # type: ignore[call-overload]
        client_errors=int(r["client_errors"]),  # type: ignore[call-overload]
        measured_records=int(r["measured_records"]),  # type: ignore[call-overload]
        measured_bytes=int(r["measured_bytes"]),  # type: ignore[call-overload]
        first_record_s=None if first < 0 else first,
    )


def version() -> str:
    """librdkafka's version as the driver links it (asks the binary's shared library)."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("rdkafka")
    if name is None:
        return "librdkafka"
    lib = ctypes.CDLL(name)
    lib.rd_kafka_version_str.restype = ctypes.c_char_p
    return f"librdkafka {lib.rd_kafka_version_str().decode()}"
