"""`Broker`: a real broker on its own event-loop thread, on a free port and a temp data dir.

It is the production broker (real log, real protocol), not a fake. `restart(abrupt=True)` drops
it as `kill -9` would and starts it again on the same port and data, so recovery runs.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, overload

from odradek.broker.config import BrokerConfig
from odradek.broker.ops.faults import FaultRule, api_key, error_code
from odradek.broker.server import Broker as BrokerServer
from odradek.testing.loop_thread import LoopThread, T
from odradek.wire.api_keys import ApiKey
from odradek.wire.errors import ErrorCode

START_TIMEOUT_S = 30.0


class Broker:
    """An in-process broker. Use as a context manager, or call start() / stop()."""

    def __init__(
        self,
        topics: Mapping[str, int] | None = None,
        config: Mapping[str, Any] | None = None,
        data_dir: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.topics = dict(topics or {})
        self.overrides = {k: str(v) for k, v in (config or {}).items()}
        self._own_dir = data_dir is None
        self.data_dir = data_dir or tempfile.mkdtemp(prefix="odradek-")
        self.host = host
        self.port = port
        self.server: BrokerServer | None = None
        self._loop_thread = LoopThread("odradek-broker", START_TIMEOUT_S)

    # -- lifecycle ------------------------------------------------------------------------------

    def _config(self) -> BrokerConfig:
        props = {"listeners": f"PLAINTEXT://{self.host}:{self.port}", "log.dirs": self.data_dir}
        props.update(self.overrides)
        return BrokerConfig(props)

    def start(self) -> Broker:
        async def boot() -> None:
            self.server = BrokerServer(self._config())
            await self.server.start()
            self.port = self.server.bound[0].port
            for name, partitions in self.topics.items():
                if self.server.topics.info(name) is None:
                    self.server.topics.create_topic(name, partitions, -1)

        self._loop_thread.start(boot)
        return self

    # Typed for the one-argument form every caller uses; extra `args` are passed through.
    @overload
    def call(self, fn: Callable[[BrokerServer], Coroutine[Any, Any, T]]) -> T: ...
    @overload
    def call(self, fn: Callable[[BrokerServer], T]) -> T: ...
    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run `fn(server, *args)` on the broker's loop (a coroutine function is awaited)."""
        assert self.server is not None
        return self._loop_thread.call(fn, self.server, *args)

    def _shutdown(self, clean: bool) -> None:
        if not self._loop_thread.running or self.server is None:
            return
        self.call(lambda server: server.stop(clean=clean))
        self._loop_thread.stop()
        self.server = None

    def stop(self) -> None:
        """Stop cleanly and remove the temporary data dir (when this object made it)."""
        self._shutdown(clean=True)
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def restart(self, abrupt: bool = False) -> None:
        """Stop (cleanly, or as kill -9 would) and start again on the same port and data."""
        self._shutdown(clean=not abrupt)
        self.start()

    # -- faults ---------------------------------------------------------------------------------

    def fail(self, api: ApiKey | int | str, error: ErrorCode | int | str, count: int = 1) -> None:
        """Answer the next `count` requests of `api` with `error` (nothing is executed)."""
        rule = FaultRule(api_key(api), count, error_code(error))
        self.call(lambda s: s.faults.add(rule))

    def delay(self, api: ApiKey | int | str, ms: int, count: int = 1) -> None:
        """Hold the next `count` requests of `api` for `ms` milliseconds before handling them."""
        rule = FaultRule(api_key(api), count, None, ms)
        self.call(lambda s: s.faults.add(rule))

    def clear_faults(self) -> None:
        self.call(lambda s: s.faults.clear())

    def pause(self) -> None:
        """Stop answering: requests are held (connections stay open) until resume()."""
        self.call(lambda s: s.faults.pause())

    def resume(self) -> None:
        self.call(lambda s: s.faults.resume())

    def fail_disk(
        self, error: str | None, dir: str | None = None, ops: tuple[str, ...] | None = None
    ) -> None:
        """A full or failing disk: writes and fsyncs in log dir `dir` (every dir when None)
        fail with `error`, "ENOSPC" or "EIO". The next append there takes the dir offline, as
        Kafka does: its partitions answer KAFKA_STORAGE_ERROR. `ops=("fsync",)` fails only
        fsyncs (with `flush.messages=1` every append syncs), `ops=("write",)` only writes.

        `fail_disk(None)` clears the fault; when a dir went offline meanwhile, the broker is
        restarted as an operator would after freeing space (abruptly: the logs are recovered
        and every acknowledged record is there), since Kafka brings an offline dir back only
        with a restart."""
        self.call(lambda s: s.fail_disk(error, dir, ops))
        if error is None and self.call(lambda s: bool(s.logs.offline_dirs)):
            self.restart(abrupt=True)

    def drop_connections(self) -> int:
        """Close every client connection, as a network blip would."""
        return self.call(lambda s: s.drop_connections())

    # -- access ---------------------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def __enter__(self) -> Broker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
