"""`__transaction_state` keys and values: golden bytes both ways, v1 decoding, round trips."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.coordinator.txn import records as rec
from odradek.coordinator.txn.state import TxnMetadata, TxnState


def h(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", "").replace("\n", ""))


KEY = h("0000 0003 747831")  # version 0, "tx1"

# value v0: pid 5, epoch 2, timeout 60000, Ongoing, [("t", [0, 1])], update 1000, start 900
ONGOING = h("""
0000
0000000000000005 0002 0000ea60 01
00000001 0001 74 00000002 00000000 00000001
00000000000003e8 0000000000000384
""")

# value v0: Empty has null partitions
EMPTY = h("0000 0000000000000005 0002 0000ea60 00 ffffffff 00000000000003e8 ffffffffffffffff")


def test_key_golden() -> None:
    assert rec.encode_key("tx1") == KEY
    assert rec.decode_key(KEY) == "tx1"


def test_unknown_key_version_is_none() -> None:
    assert rec.decode_key(h("0001 0003 747831")) is None


def test_value_golden_ongoing() -> None:
    v = rec.TxnLogValue(5, 2, 60000, TxnState.ONGOING, {"t": [0, 1]}, 1000, 900)
    assert rec.encode_value(v) == ONGOING
    assert rec.decode_value(ONGOING) == v


def test_value_golden_empty() -> None:
    v = rec.TxnLogValue(5, 2, 60000, TxnState.EMPTY, None, 1000, -1)
    assert rec.encode_value(v) == EMPTY
    assert rec.decode_value(EMPTY) == v


def test_value_v1_flexible_with_tags() -> None:
    # v1: compact array of 1 topic "t" with compact [3], struct tags 0; then top-level tags:
    # tag 0 previous producer id 4, tag 2 client transaction version 2
    data = h("""
    0001
    0000000000000005 0002 0000ea60 02
    02 02 74 02 00000003 00
    00000000000003e8 0000000000000384
    02 00 08 0000000000000004 02 02 0002
    """)
    v = rec.decode_value(data)
    assert (v.producer_id, v.producer_epoch, v.status) == (5, 2, TxnState.PREPARE_COMMIT)
    assert v.partitions == {"t": [3]}
    assert (v.previous_producer_id, v.client_txn_version) == (4, 2)
    md = TxnMetadata.from_value("tx1", v)
    assert md.partitions == {("t", 3)} and md.last_producer_id == 4


@pytest.mark.parametrize("data", [h("0002 00"), ONGOING[:-3], h("0000 0001")])
def test_bad_values_raise_record_error(data: bytes) -> None:
    with pytest.raises(rec.TxnRecordError):
        rec.decode_value(data)


@given(
    pid=st.integers(-1, 2**63 - 1),
    epoch=st.integers(-1, 32767),
    timeout=st.integers(0, 2**31 - 1),
    status=st.sampled_from(list(TxnState)),
    parts=st.dictionaries(
        st.text(min_size=1, max_size=20), st.lists(st.integers(0, 1000), max_size=5), max_size=4
    ),
    ts=st.tuples(st.integers(-1, 2**62), st.integers(-1, 2**62)),
)
def test_value_round_trip(
    pid: int,
    epoch: int,
    timeout: int,
    status: TxnState,
    parts: dict[str, list[int]],
    ts: tuple[int, int],
) -> None:
    v = rec.TxnLogValue(
        pid, epoch, timeout, int(status), None if status == TxnState.EMPTY else parts, *ts
    )
    assert rec.decode_value(rec.encode_value(v)) == v


@given(st.binary(max_size=64))
def test_arbitrary_bytes_only_raise_record_errors(data: bytes) -> None:
    try:
        rec.decode_value(data)
    except (rec.TxnRecordError, UnicodeDecodeError):
        pass
