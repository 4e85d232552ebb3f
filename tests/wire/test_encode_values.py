"""The C encoder of value-only records (odradek/wire/_framing.c `encode_values`, the fast path
of `odradek produce`) writes exactly the records of the Python encoder
(producer_client.encode_record), and stops where the next record would pass `room`."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.cli_commands.producer_client import encode_record

framing = pytest.importorskip("odradek.wire._framing", reason="odradek.wire._framing not built")

values_st = st.lists(
    st.one_of(
        st.binary(max_size=200), st.sampled_from([b"", b"x" * 8191, b"y" * 8192, b"z" * 70000])
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(
    values=values_st,
    start=st.integers(0, 5),
    offset_delta=st.sampled_from([0, 1, 63, 64, 8191, 8192, 2**20, 2**31 - 100]),
    ts_delta=st.sampled_from([0, 1, -1, 63, 64, 2**20, -(2**40), 2**45]),
    room=st.one_of(st.integers(0, 3000), st.just(10**9)),
)
def test_same_records_as_the_python_encoder(
    values: list[bytes], start: int, offset_delta: int, ts_delta: int, room: int
) -> None:
    data, count = framing.encode_values(values, start, len(values), offset_delta, ts_delta, room)
    expected = [
        encode_record(None, v, (), ts_delta, offset_delta + i) for i, v in enumerate(values[start:])
    ]
    sizes = list(itertools.accumulate(map(len, expected)))
    fit = sum(1 for size in sizes if size <= room)
    assert count == fit
    assert data == b"".join(expected[:fit])


def test_bad_arguments_raise() -> None:
    with pytest.raises(TypeError):
        framing.encode_values((b"a",), 0, 1, 0, 0, 100)
    with pytest.raises(TypeError):
        framing.encode_values(["a"], 0, 1, 0, 0, 100)
    with pytest.raises(ValueError):
        framing.encode_values([b"a"], -1, 1, 0, 0, 100)
