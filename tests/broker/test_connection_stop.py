"""A broker's stop ends the handling task of every open connection, even one in the middle of a
request (a long-polling fetch): no "Task was destroyed but it is pending!" at loop close."""

from __future__ import annotations

import time

from odradek.testing import Broker
from odradek.testing.raw import RawClient
from tests.broker.test_fetch_sessions import V, fetch_request

DEADLINE_S = 10


def long_poll(client: RawClient) -> None:
    req = fetch_request(0, -1, [("t", 0, 0)], max_wait=120_000, min_bytes=1, max_bytes=1 << 20)
    client.send(client.encode(req, V)[1])


def test_stop_ends_the_task_of_a_connection_in_a_long_poll() -> None:
    with Broker(topics={"t": 1}) as broker, RawClient(broker.bootstrap) as client:
        long_poll(client)

        def in_dispatch(server):  # the request was taken and is being handled
            conns = list(server.connections)
            return [c._task for c in conns if c._muted_in_flight and not c._frames]

        deadline = time.monotonic() + DEADLINE_S
        while not (tasks := broker.call(in_dispatch)):
            assert time.monotonic() < deadline, "the fetch never reached its handler"
            time.sleep(0.01)  # polling with a deadline, not synchronisation
        broker.stop()
        assert all(task.done() for task in tasks)
