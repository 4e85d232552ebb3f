"""Kafka mutes a channel while a request is in flight; odradek pauses reading lazily: not at the
request's cut (an answer written right away then costs no pause/resume pair), but at the first
read that comes while it is in flight, so at most one more buffer is taken from the socket."""

from __future__ import annotations

import time

from odradek.testing import Broker
from odradek.testing.raw import RawClient
from odradek.wire.frames import SCRATCH
from tests.broker.test_connection_stop import long_poll

DEADLINE_S = 10


def _in_flight(server):  # the long poll is being handled: (reading, bytes held, frames waiting)
    out = []
    for c in list(server.connections):
        if c._muted_in_flight and c.transport is not None:
            held = c._decoder.buffered + sum(len(p) for p, _ in c._frames)
            out.append((c.transport.is_reading(), held, len(c._frames)))
    return out


def _wait(broker: Broker, done):
    deadline = time.monotonic() + DEADLINE_S
    while not (state := broker.call(_in_flight)) or not done(state[0]):
        assert time.monotonic() < deadline, f"connection state never settled: {state}"
        time.sleep(0.01)  # polling with a deadline, not synchronisation
    return state[0]


def test_reading_stops_at_the_first_read_while_a_request_is_in_flight() -> None:
    with Broker(topics={"t": 1}) as broker, RawClient(broker.bootstrap) as client:
        long_poll(client)
        # nothing more sent: the connection is not paused for a request in flight alone
        reading, _held, _frames = _wait(broker, lambda s: True)
        assert reading
        # then 1 MB of pipelined frames: one buffer is read and reading stops until the answer
        client.send((b"\x00\x00\x00\x10" + b"\x00" * 16) * ((1 << 20) // 20))
        reading, held, _frames = _wait(broker, lambda s: not s[0])
        assert not reading
        assert held <= SCRATCH
