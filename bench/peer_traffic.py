"""Broker-to-broker round trips, counted from the kernel's TCP counters (ss(8), tcp_info).

A replica fetcher holds one connection to each leader broker and has one request in flight on
it at a time (Kafka's ReplicaFetcherThread, odradek's ReplicaFetcher), and a Fetch request is a
few hundred bytes: one data segment. So on the follower's end of that connection
`data_segs_out` counts its Fetch requests (and as many responses), and `bytes_received` the
response bytes. Reading those before and after a run gives, for either broker and without its
metrics, the follower fetches per MB and their mean response size.

`ss -tinpH state established` prints each TCP socket on two lines: addresses and
`users:(("name",pid=P,fd=F))`, then the tcp_info fields (`bytes_received:N`,
`data_segs_out:N`, ...). Sockets of processes this user cannot see have no `users:` part.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass

_PID = re.compile(r"pid=(\d+)")
_FIELD = re.compile(r"\b(bytes_received|data_segs_out|bytes_sent):(\d+)")


@dataclass(frozen=True, slots=True)
class Counters:
    """One connection's requests sent (data segments out) and bytes received so far."""

    requests: int
    received: int


def connections(pids: set[int], ports: set[int]) -> dict[tuple[int, str, str], Counters]:
    """Established connections of the processes `pids` to the listening `ports` (of any
    address): (pid, local address, remote address) -> counters."""
    out = subprocess.run(
        ["ss", "-tinpH", "state", "established"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    return parse(out, pids, ports)


def parse(out: str, pids: set[int], ports: set[int]) -> dict[tuple[int, str, str], Counters]:
    """The connections of `connections` in the text `ss -tinpH state established` printed."""
    result: dict[tuple[int, str, str], Counters] = {}
    lines = out.splitlines()
    for head, info in zip(lines[::2], lines[1::2], strict=False):
        parts = head.split()
        if len(parts) < 4:
            continue
        local, remote = parts[2], parts[3]
        m = _PID.search(head)
        if m is None or int(m.group(1)) not in pids:
            continue
        if int(remote.rsplit(":", 1)[1]) not in ports:
            continue
        fields = dict(_FIELD.findall(info))
        result[(int(m.group(1)), local, remote)] = Counters(
            int(fields.get("data_segs_out", 0)), int(fields.get("bytes_received", 0))
        )
    return result


def delta(
    before: dict[tuple[int, str, str], Counters], after: dict[tuple[int, str, str], Counters]
) -> dict[tuple[int, str, str], Counters]:
    """What each connection of `after` sent and received since `before` (all of it when new)."""
    out = {}
    for key, c in after.items():
        b = before.get(key, Counters(0, 0))
        out[key] = Counters(c.requests - b.requests, c.received - b.received)
    return out
