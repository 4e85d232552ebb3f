"""Incremental fetch sessions (KIP-227), as Kafka's FetchSessionCache.

session_id 0, epoch -1   full fetch, no session
session_id 0, epoch 0    full fetch, open a session (its id goes back in the response)
session_id N, epoch 0    the same, session N removed first (a client starting over)
session_id N, epoch k>0  incremental: the request names only changed partitions, the
                         response only partitions with data or changed metadata
session_id N, epoch -1   close session N; full fetch without a session
"""

from __future__ import annotations

import itertools
import random
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field

from odradek.wire.errors import ErrorCode

MAX_SESSIONS = 1000
FINAL_EPOCH = -1
INITIAL_EPOCH = 0


@dataclass(slots=True)
class SessionPartition:
    topic: str
    topic_id: uuid.UUID | None  # None before Fetch v13 (topics by name)
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    # what the client last saw, to decide whether an incremental response must include it
    last_hw: int = -1
    last_lso: int = -1
    last_log_start: int = -1


@dataclass(slots=True)
class FetchSession:
    session_id: int
    epoch: int
    partitions: dict[tuple[str, int], SessionPartition] = field(default_factory=dict)
    last_used: float = field(default_factory=time.monotonic)


class FetchSessionCache:
    def __init__(self, max_sessions: int = MAX_SESSIONS) -> None:
        self.sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self.max_sessions = max_sessions
        self._ids = itertools.count(random.randint(1, 1 << 20))

    def new_session(self) -> FetchSession:
        while len(self.sessions) >= self.max_sessions:
            self.sessions.popitem(last=False)
        sid = next(self._ids) & 0x7FFFFFFF or next(self._ids)
        session = FetchSession(sid, 1)
        self.sessions[sid] = session
        return session

    def lookup(self, session_id: int, epoch: int) -> tuple[ErrorCode, FetchSession | None]:
        session = self.sessions.get(session_id)
        if session is None:
            return ErrorCode.FETCH_SESSION_ID_NOT_FOUND, None
        if session.epoch != epoch:
            return ErrorCode.INVALID_FETCH_SESSION_EPOCH, None
        self.sessions.move_to_end(session_id)
        session.last_used = time.monotonic()
        return ErrorCode.NONE, session

    def remove(self, session_id: int) -> None:
        self.sessions.pop(session_id, None)
