"""The record framing walk, pure Python and C (odradek/wire/_framing.c), held to the same cases.

Both walks make Kafka's LogValidator / DefaultRecord.readFrom checks on a produced batch's
records; the broker runs the C one when it was built. Every case here runs against each walk
available (the C parameter is skipped, with the reason, where the extension was not built) and
must give the same message; property tests check that the two agree on what they accept.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.testing.hostile_batches import good_records, record
from odradek.wire import records
from odradek.wire.batch import HEADER_SIZE, InvalidRecordError
from odradek.wire.records import (
    build_batch,
    check_framing_py,
    framing_implementations,
)

IMPLS = framing_implementations()
C_WALK = IMPLS.get("c")
BASE_TS = 1_700_000_000_000
NO_C = "odradek.wire._framing not built, or ODRADEK_PURE_PYTHON=1"


@pytest.fixture(
    params=[
        "python",
        pytest.param(
            "c",
            marks=pytest.mark.skipif(C_WALK is None, reason=NO_C),
        ),
    ]
)
def walk(request: pytest.FixtureRequest):
    return IMPLS[request.param]


def section_of(batch: bytes) -> bytes:
    return batch[HEADER_SIZE:]


# -- valid sections ----------------------------------------------------------------------------

VALID = [
    ("one record", record(0), 1),
    ("null key and value", record(0, None, None), 1),
    ("empty key and value", record(0, b"", b""), 1),
    ("headers with null and empty values", record(0, headers=[(b"a", None), (b"", b"")]), 1),
    ("300 records: two-byte offset deltas", good_records(300), 300),
    ("negative and 10-byte timestamp deltas", record(0, timestamp_delta=-(2**63)), 1),
    ("a 70 KB value: three-byte lengths", record(0, b"", b"x" * 70_000), 1),
    (
        "a non-canonical zero header count",
        # header count written as 0x80 0x00 (zero, two bytes): the length grows by one
        bytes([record(0)[0] + 2]) + record(0)[1:-1] + b"\x80\x00",
        1,
    ),
    (
        "build_batch: mixed records",
        section_of(
            build_batch(
                [
                    (
                        b"k%d" % i,
                        os.urandom(i * 13),
                        [(f"h{j}", b"v" * j) for j in range(i % 4)],
                        BASE_TS + (i * 7919) % 1000 - 500,
                    )
                    for i in range(200)
                ]
            )
        ),
        200,
    ),
    ("no records in no bytes", b"", 0),
]


@pytest.mark.parametrize(("case", "section", "count"), VALID, ids=[c[0] for c in VALID])
@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_valid_sections_pass(walk, kind, case: str, section: bytes, count: int) -> None:
    walk(kind(section), 0, len(section), count)
    # at an offset inside a larger buffer, with bytes after `end` that are not looked at
    padded = b"\xff" * 7 + section + b"\x01\x02"
    walk(kind(padded), 7, 7 + len(section), count)


def test_the_walk_stops_at_10000_records_of_real_batches(walk) -> None:
    batch = build_batch([(None, b"v" * 100, (), BASE_TS + i) for i in range(10_000)])
    walk(batch, HEADER_SIZE, len(batch), 10_000)


# -- invalid sections, with the message both walks give ----------------------------------------

OVERRUN = "record 0: key or value overruns the record"
INVALID = [
    (
        "fewer records than declared",
        good_records(2),
        3,
        "record data ends before the declared records",
    ),
    (
        "more records than declared",
        good_records(3),
        2,
        "23 bytes left after the 2 declared records",
    ),
    (
        "trailing garbage",
        good_records(2) + b"\x00\x01\x02",
        2,
        "3 bytes left after the 2 declared records",
    ),
    (
        "truncated last record",
        good_records(3)[:-3],
        3,
        "record 2 declares 22 bytes with 19 left in the batch",
    ),
    ("offset deltas out of order", record(1) + record(0), 2, "record 0 has offset delta 1"),
    ("offset deltas repeated", record(0) + record(0), 2, "record 1 has offset delta 0"),
    ("offset deltas with a gap", record(0) + record(2), 2, "record 1 has offset delta 2"),
    (
        "record length too long",
        record(0, length_fix=1) + record(1),
        2,
        "record 0 declares 9 bytes but holds 8",
    ),
    (
        "record length too short",
        record(0, length_fix=-1) + record(1),
        2,
        "record 0: key or value overruns the record",
    ),
    ("record length zero", b"\x00" * 10, 1, "record 0 declares 0 bytes with 9 left in the batch"),
    (
        "record length 5",
        b"\x0a" + b"\x00" * 6,
        1,
        "record 0 declares 5 bytes with 6 left in the batch",
    ),
    (
        "negative record length",
        b"\x03" + record(0)[1:],
        1,
        "record 0 declares -2 bytes with 8 left in the batch",
    ),
    (
        "record length 0x7fffffff",
        b"\xfe\xff\xff\xff\x0f" + record(0)[1:] + bytes(50),
        1,
        "record 0 declares 2147483647 bytes with 58 left in the batch",
    ),
    (
        "record length varint of 6 bytes",
        b"\xff" * 6 + bytes(10),
        1,
        "record 0: varint longer than 5 bytes",
    ),
    ("key length below -1", record(0, b"", key_length=-2), 1, "record 0: invalid key length -2"),
    (
        "value length below -1",
        record(0, value=b"", value_length=-5),
        1,
        "record 0: invalid value length -5",
    ),
    ("key length overruns", record(0, b"key", key_length=60), 1, OVERRUN),
    ("value length overruns", record(0, value=b"v", value_length=2), 1, OVERRUN),
    (
        "header count too large",
        record(0, headers=[(b"h", b"v")], header_count=50),
        1,
        "record 0: invalid header count 50",
    ),
    (
        "negative header count",
        record(0, headers=[], header_count=-1),
        1,
        "record 0: invalid header count -1",
    ),
    (
        "negative header key length",
        record(0, headers=[(b"h", b"v")])[:-4] + b"\x01h\x02v",
        1,
        "record 0: invalid header key length -1",
    ),
    (
        "header value length overruns",
        record(0, headers=[(b"h", b"v")])[:-2] + b"\x04v",
        1,
        "record 0: invalid header value length 2",
    ),
    ("unfinished timestamp varlong", b"\x0c\x00" + b"\xff" * 11, 1, "record 0: truncated varint"),
    (
        "timestamp varlong of 11 bytes",
        b"\x1c\x00" + b"\xff" * 10 + b"\x00" * 4,
        1,
        "record 0: varint longer than 10 bytes",
    ),
    ("count of 3 in 20 bytes", bytes(20), 3, "record count 3 does not fit 20 bytes"),
    ("negative count", good_records(1), -1, "record count -1 does not fit 23 bytes"),
    ("one record in no bytes", b"", 1, "record count 1 does not fit 0 bytes"),
]


@pytest.mark.parametrize(
    ("case", "section", "count", "message"), INVALID, ids=[c[0] for c in INVALID]
)
def test_invalid_sections_raise_invalid_record(
    walk, case: str, section: bytes, count: int, message: str
) -> None:
    with pytest.raises(InvalidRecordError) as exc:
        walk(section, 0, len(section), count)
    assert str(exc.value) == message
    # the same inside a larger buffer whose bytes past `end` would make it look complete
    padded = b"\x00" + section + good_records(3)
    with pytest.raises(InvalidRecordError) as exc:
        walk(bytearray(padded), 1, 1 + len(section), count)
    assert str(exc.value) == message


def test_end_past_the_buffer_is_invalid_record(walk) -> None:
    section = good_records(2)
    with pytest.raises(InvalidRecordError):
        walk(section, 0, len(section) + 40, 2)


# -- the two walks agree -----------------------------------------------------------------------

needs_c = pytest.mark.skipif(C_WALK is None, reason=NO_C)


def outcome(fn, data: bytes, pos: int, end: int, count: int) -> str | None:
    """None when the walk accepts the section, "invalid" when it raises InvalidRecordError.

    Messages are compared on the cases above only: where a varint straddles a record's end the
    Python walk's inline reads run into the next bytes and may report a later symptom ("invalid
    value length -64" for the C walk's "truncated varint"); the verdict is the same.
    """
    try:
        fn(data, pos, end, count)
    except InvalidRecordError:
        return "invalid"
    return None


_records = st.lists(
    st.tuples(
        st.one_of(st.none(), st.binary(max_size=40)),
        st.one_of(st.none(), st.binary(max_size=300)),
        st.lists(
            st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=8))),
            max_size=3,
        ),
        st.integers(min_value=BASE_TS - 2**40, max_value=BASE_TS + 2**40),
    ),
    min_size=1,
    max_size=80,
)


@needs_c
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_records, st.data())
def test_walks_agree_on_mutated_valid_sections(recs, data) -> None:
    section = bytearray(section_of(build_batch(recs)))
    count = len(recs)
    assert outcome(C_WALK, bytes(section), 0, len(section), count) is None
    for _ in range(data.draw(st.integers(0, 4), label="mutations")):
        i = data.draw(st.integers(0, len(section) - 1), label="at")
        how = data.draw(st.sampled_from(["set", "delete", "insert"]), label="how")
        byte = data.draw(st.integers(0, 255), label="byte")
        if how == "set":
            section[i] = byte
        elif how == "delete" and len(section) > 1:
            del section[i]
        else:
            section.insert(i, byte)
    count += data.draw(st.sampled_from([0, 0, 0, -1, 1]), label="count change")
    buf = bytes(section) + good_records(2)  # bytes after `end` that a lax walk might wander into
    assert outcome(C_WALK, buf, 0, len(section), count) == outcome(
        check_framing_py, buf, 0, len(section), count
    )


@needs_c
@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=200), st.integers(min_value=-1, max_value=30))
def test_walks_agree_on_arbitrary_bytes(section: bytes, count: int) -> None:
    assert outcome(C_WALK, section, 0, len(section), count) == outcome(
        check_framing_py, section, 0, len(section), count
    )


# -- which walk runs ---------------------------------------------------------------------------


def test_check_framing_is_the_c_walk_when_built() -> None:
    assert records.check_framing is (C_WALK or check_framing_py)


FALLBACK_CHECK = (
    "from odradek.wire import records\n"
    "assert records.check_framing is records.check_framing_py, records.check_framing\n"
    "assert list(records.framing_implementations()) == ['python']\n"
)


def test_without_the_extension_the_python_walk_runs() -> None:
    """The import guard: a missing (or unbuildable) extension leaves the pure-Python walk."""
    code = "import sys; sys.modules['odradek.wire._framing'] = None\n" + FALLBACK_CHECK
    env = {k: v for k, v in os.environ.items() if k != "ODRADEK_PURE_PYTHON"}
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60, env=env)


def test_odradek_pure_python_leaves_the_extension_out() -> None:
    env = {**os.environ, "ODRADEK_PURE_PYTHON": "1"}
    subprocess.run([sys.executable, "-c", FALLBACK_CHECK], check=True, timeout=60, env=env)


# -- the C walk under AddressSanitizer -----------------------------------------------------------

_ASAN_DRIVER = """
import ctypes, importlib.machinery, importlib.util, random, sys
name = "odradek.wire._framing"
loader = importlib.machinery.ExtensionFileLoader(name, sys.argv[1])
mod = importlib.util.module_from_spec(importlib.util.spec_from_loader(name, loader))
loader.exec_module(mod)
from odradek.wire.batch import InvalidRecordError
from odradek.wire.records import build_batch
rng = random.Random(int(sys.argv[2]))
for _ in range(int(sys.argv[3])):
    if rng.random() < 0.5:  # a valid section, mutated
        n = rng.randint(1, 20)
        recs = [
            (rng.choice([None, b"k" * rng.randint(0, 100)]),
             rng.choice([None, b"v" * rng.randint(0, 300)]),
             [("h" * rng.randint(0, 3), rng.choice([None, b"x"]))] * rng.randint(0, 2),
             1_700_000_000_000 + rng.randint(-10**12, 10**12))
            for _ in range(n)
        ]
        sec = bytearray(build_batch(recs)[61:])
        for _ in range(rng.randint(0, 3)):
            i = rng.randrange(len(sec))
            h = rng.random()
            if h < 0.6:
                sec[i] = rng.choice([0, 0x7F, 0x80, 0xFF, rng.randrange(256)])
            elif h < 0.8:
                del sec[i]
            else:
                sec.insert(i, rng.randrange(256))
        if rng.random() < 0.3:
            sec = sec[: rng.randrange(len(sec) + 1)]
        count = n + rng.choice([0, 0, 0, -1, 1])
    elif rng.random() < 0.5:  # records whose declared length ends at the buffer's end
        sec = bytearray()
        count = rng.randint(1, 3)
        for i in range(count):
            body = bytearray([0]) + bytes(
                rng.choice([0x80, 0xFF, 0x81, 0, 2, 2 * i, rng.randrange(256)])
                for _ in range(rng.randint(5, 24))
            )
            n = len(body) + rng.choice([0, 0, 0, -1, 1])
            sec += bytes([(n << 1) & 0x7F | 0x80, n >> 6]) if n > 63 else bytes([n << 1])
            sec += body
    else:  # bytes that look like small varints
        pool = [0, 2, 0x0C, 0x10, 0x7F, 0x80, 0xFF]
        sec = bytes(rng.choice(pool + [rng.randrange(256)]) for _ in range(rng.randint(0, 80)))
        count = rng.randint(-1, 6)
    # a malloc'd block that ends where the section ends: any read past it is a
    # heap-buffer-overflow (ctypes keeps buffers of 16 bytes or less inside the object: pad)
    data = bytes([0xFF]) * 32 + bytes(sec)
    buf = ctypes.create_string_buffer(data, len(data))
    try:
        mod.check_framing(buf, 32, len(data), count)
    except InvalidRecordError:
        pass
print("clean")
"""


@pytest.mark.slow
def test_c_walk_reads_nothing_outside_the_buffer_under_asan(tmp_path) -> None:
    """Hostile and mutated sections in exactly-sized buffers, with AddressSanitizer and UBSan.

    Compiles _framing.c with -fsanitize=address,undefined; skipped where gcc or libasan is not
    installed.
    """
    import shutil
    import sysconfig

    source = os.path.join(os.path.dirname(records.__file__), "_framing.c")
    gcc = shutil.which("gcc")
    libs = []
    if gcc:
        for lib in ("libasan.so", "libubsan.so"):
            path = subprocess.run(
                [gcc, f"-print-file-name={lib}"], capture_output=True, text=True, check=True
            ).stdout.strip()
            libs.append(path)
    if not gcc or not all(os.path.isabs(p) and os.path.exists(p) for p in libs):
        pytest.skip("needs gcc with libasan and libubsan")
    so = tmp_path / "_framing_asan.so"
    include = sysconfig.get_paths()["include"]
    subprocess.run(
        [
            gcc,
            "-O1",
            "-g",
            "-fsanitize=address,undefined",
            "-fno-sanitize-recover=undefined",
            "-fno-omit-frame-pointer",
            "-shared",
            "-fPIC",
            f"-I{include}",
            source,
            "-o",
            str(so),
        ],
        check=True,
        timeout=120,
    )
    env = {
        **os.environ,
        "LD_PRELOAD": " ".join(libs),
        "ASAN_OPTIONS": "detect_leaks=0",
        "PYTHONMALLOC": "malloc",  # so ASan sees every buffer's true end
    }
    done = subprocess.run(
        [sys.executable, "-c", _ASAN_DRIVER, str(so), "11", "40000"],
        capture_output=True,
        text=True,
        timeout=280,
        env=env,
    )
    assert done.returncode == 0 and done.stdout.strip() == "clean", done.stderr[-3000:]


def test_walk_window_agrees_on_every_cut() -> None:
    """The window walk (a decompressed stream read piece by piece) stops before the record cut
    by the window's end, in C and in Python alike, and walks what the whole walk walks."""
    from odradek.testing.hostile_batches import good_records, record
    from odradek.wire import records as r

    section = good_records(20) + record(20, b"k", b"v" * 300)
    impls = [r.walk_window_py] + ([r._walk_window_c] if r._walk_window_c is not None else [])
    for end in range(len(section) + 1):
        results = {impl(section, 0, end, 0, 21) for impl in impls}
        assert len(results) == 1, (end, results)
    for impl in impls:
        assert impl(section, 0, len(section), 0, 21) == (len(section), 21)
        # resumed from record 5, numbered from 5
        start = len(good_records(5))
        assert impl(section, start, len(section), 5, 100) == (len(section), 16)
        with pytest.raises(InvalidRecordError):
            impl(section, start, len(section), 4, 100)  # offset delta 5 is not record 4
