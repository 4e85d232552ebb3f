"""`Broker`: a real broker on its own event-loop thread, on a free port and a temp data dir.

It is the production broker (real log, real protocol), not a fake. `restart(abrupt=True)` drops
it as `kill -9` would and starts it again on the same ports and data, so recovery runs.

A secure broker in one line (odradek.testing.security): a throwaway CA and certificates, SASL
users, and the settings each client needs:

    with Broker(security="sasl_ssl", mechanism="SCRAM-SHA-256", users={"alice": "pw"}) as b:
        producer = confluent_kafka.Producer(b.client_config(user="alice"))
        consumer = KafkaConsumer("t", **b.kafka_python_config())

security: "ssl", "mtls", "sasl_plaintext", "sasl_ssl"; mechanism (SASL): "PLAIN" (default),
"SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"; `plaintext_too=True` adds a PLAINTEXT listener
(`plaintext_bootstrap`) beside the secure one (`bootstrap`).

Many brokers, one per test (a thousand in a few seconds; `python -m bench.startup`):

    with Broker(shared_loop=True, tmpfs=True) as b:   # the odradek_fresh_broker fixture
        ...

`shared_loop=True` runs the broker on the one event-loop thread all such brokers share
(odradek.testing.loop_thread.SharedSlot) instead of a thread and loop of its own; it is still
a broker of its own: own port, own data dir, own tasks (cancelled at stop). A test that blocks
the loop (a slow `call`) then holds up the other shared brokers alive at the time too.
A test broker's groups start without Kafka's 3 s initial rebalance delay
(`TEST_DEFAULTS`); `config={"group.initial.rebalance.delay.ms": 3000}` asks for it.

`tmpfs=True` puts the temporary data dir in /dev/shm (when there is one; $ODRADEK_TMPFS names
another dir, or none when empty): no disk writes or fsyncs, data in RAM, so keep it for tests
that write little.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, overload

from odradek.broker.config import BrokerConfig
from odradek.broker.ops.faults import FaultRule, api_key, error_code
from odradek.broker.server import Broker as BrokerServer
from odradek.testing.loop_thread import LoopThread, SharedSlot, T
from odradek.testing.security import ClientSettings, Security
from odradek.wire.api_keys import ApiKey
from odradek.wire.errors import ErrorCode

START_TIMEOUT_S = 30.0
TMPFS = "/dev/shm"
# Settings a test broker gets unless its `config` says otherwise. As in Kafka's own embedded
# test clusters, a new group does not wait `group.initial.rebalance.delay.ms` (3 s in
# production) for more members to join: a test's group consumer gets its first record at once.
TEST_DEFAULTS: dict[str, str] = {"group.initial.rebalance.delay.ms": "0"}


def tmpfs_dir() -> str | None:
    """Where `tmpfs=True` puts data dirs: $ODRADEK_TMPFS when set (empty: the default temp
    dir, e.g. where /dev/shm is a container's 64 MB), else /dev/shm when it is a writable
    directory (Linux), else None (the default temp dir)."""
    path = os.environ.get("ODRADEK_TMPFS", TMPFS)
    return path if path and os.path.isdir(path) and os.access(path, os.W_OK | os.X_OK) else None


class Broker(ClientSettings):
    """An in-process broker. Use as a context manager, or call start() / stop()."""

    def __init__(
        self,
        topics: Mapping[str, int] | None = None,
        config: Mapping[str, Any] | None = None,
        data_dir: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        security: str | Security | None = None,
        mechanism: str | None = None,
        users: Mapping[str, str] | None = None,
        plaintext_too: bool = False,
        shared_loop: bool = False,
        tmpfs: bool = False,
        schema_registry: bool = False,
    ) -> None:
        self.topics = dict(topics or {})
        self.schema_registry = schema_registry  # the built-in registry (odradek/registry/)
        self.registry_port = 0  # kept across restart
        self.overrides = {**TEST_DEFAULTS, **{k: str(v) for k, v in (config or {}).items()}}
        self._own_dir = data_dir is None
        if data_dir is None:
            data_dir = tempfile.mkdtemp(prefix="odradek-", dir=tmpfs_dir() if tmpfs else None)
        elif tmpfs:
            raise ValueError("tmpfs=True is for the temporary data dir: not with data_dir")
        self.data_dir = data_dir
        self.host = host
        self.port = port
        # every listener's port by name, kept across restart (0 until first bound)
        self.ports: dict[str, int] = {}
        self.security: Security | None = None
        if isinstance(security, Security):
            self.security = security
        elif security is not None:
            # in the broker's own temp dir (removed with it; partition dirs are found by
            # name, so the broker leaves it alone), else a temp dir of its own
            self.security = Security(
                security,
                mechanism,
                users,
                directory=os.path.join(self.data_dir, "security") if self._own_dir else None,
                plaintext_too=plaintext_too,
            )
        elif mechanism is not None or users is not None or plaintext_too:
            raise ValueError("mechanism, users and plaintext_too go with security=...")
        self.server: BrokerServer | None = None
        self._clean_stop = False  # how the loop's teardown stops the server
        self._loop_thread: LoopThread | SharedSlot = (
            SharedSlot("odradek-broker", START_TIMEOUT_S)
            if shared_loop
            else LoopThread("odradek-broker", START_TIMEOUT_S)
        )

    # -- lifecycle ------------------------------------------------------------------------------

    def _config(self) -> BrokerConfig:
        props = {"listeners": f"PLAINTEXT://{self.host}:{self.port}", "log.dirs": self.data_dir}
        if self.security is not None:
            first = self.security.listener_names[0]
            ports = {first: self.port, **self.ports}
            props["listeners"] = self.security.listeners(self.host, ports)
            props.update(self.security.broker_config(self.overrides.get("super.users")))
        overrides = dict(self.overrides)
        if "super.users" in props:
            overrides.pop("super.users", None)
        if "listeners" in overrides and self.ports:
            overrides["listeners"] = keep_ports(overrides["listeners"], self.ports)
        if self.schema_registry:
            props["schema.registry.listeners"] = (
                f"{self._registry_scheme}://{self.host}:{self.registry_port}"
            )
            if self.security is not None and self.security.registry_basic_auth:
                props["schema.registry.authentication.method"] = "BASIC"
        props.update(overrides)
        return BrokerConfig(props)

    def start(self) -> Broker:
        async def boot() -> None:
            self.server = BrokerServer(self._config())
            if self.security is not None:
                self.security.install_scram(self.server.store)
            await self.server.start()
            self.port = self.server.bound[0].port
            self.ports = {b.name: b.port for b in self.server.bound}
            registry = self.server.schema_registry
            if registry is not None:
                await asyncio.wait_for(registry.ready.wait(), START_TIMEOUT_S)
                self.registry_port = registry.port
            for name, partitions in self.topics.items():
                if self.server.topics.info(name) is None:
                    self.server.topics.create_topic(name, partitions, -1)

        async def teardown() -> None:
            # the server's stop (on the shared loop; its own loop's thread has stopped it
            # already), or after a failed boot: let go of what it had taken (listeners, the
            # data dir's lock)
            server, self.server = self.server, None
            if server is not None:
                await server.stop(clean=self._clean_stop)

        self._loop_thread.start(boot, teardown)
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
        self._clean_stop = clean
        if isinstance(self._loop_thread, LoopThread):
            self.call(lambda server: server.stop(clean=clean))
        self._loop_thread.stop()  # a shared loop's slot runs the stop in its teardown
        self._clean_stop = False
        self.server = None

    def stop(self, clean: bool = True) -> None:
        """Stop and remove the temporary data dir (when this object made it). Clean: flush,
        checkpoints, clean-shutdown marker; `clean=False` drops everything as kill -9 would,
        quicker when the data is thrown away anyway (odradek_fresh_broker)."""
        self._shutdown(clean=clean)
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)
        if self.security is not None and self.security._own_dir:
            shutil.rmtree(self.security.directory, ignore_errors=True)

    def restart(self, abrupt: bool = False) -> None:
        """Stop (cleanly, or as kill -9 would) and start again on the same port and data."""
        self._shutdown(clean=not abrupt)
        self.start()

    def create_topic(
        self, name: str, partitions: int = 1, config: Mapping[str, Any] | None = None
    ) -> str:
        """Create a topic (topic-level `config` such as {"cleanup.policy": "compact"})."""
        configs = {k: str(v) for k, v in (config or {}).items()}
        self.call(lambda server: server.topics.create_topic(name, partitions, -1, configs))
        return name

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
    def _registry_scheme(self) -> str:
        return "https" if self.security is not None and self.security.uses_tls else "http"

    @property
    def schema_registry_url(self) -> str:
        """http://host:port of the built-in Schema Registry (`schema_registry=True`); https
        when `security` uses TLS (its ssl.* settings, client certificates under "mtls")."""
        if not self.schema_registry:
            raise ValueError("this broker was made without schema_registry=True")
        return f"{self._registry_scheme}://{self.host}:{self.registry_port}"

    def schema_registry_config(self, user: str | None = None) -> dict[str, str]:
        """SchemaRegistryClient's config for `user` (default: the first): the URL, and with
        `security` the CA, the user's client certificate ("mtls") or Basic credentials (SASL
        PLAIN and SCRAM users, `schema.registry.authentication.method=BASIC`)."""
        conf = {"url": self.schema_registry_url}
        if self.security is not None:
            conf.update(self.security.registry_client_config(user))
        return conf

    @property
    def bootstrap(self) -> str:
        """host:port of the first listener (the secure one with `security`)."""
        return f"{self.host}:{self.port}"

    def bootstrap_of(self, listener: str) -> str:
        """host:port of listener `listener` (e.g. "PLAINTEXT", "SASL_SSL")."""
        try:
            return f"{self.host}:{self.ports[listener.upper()]}"
        except KeyError:
            names = ", ".join(self.ports)
            raise KeyError(f"no listener {listener!r} (listeners: {names})") from None

    @property
    def plaintext_bootstrap(self) -> str:
        """The PLAINTEXT listener's host:port (`plaintext_too=True`, or no security)."""
        return self.bootstrap_of("PLAINTEXT")

    def kcat_args(self, user: str | None = None) -> list[str]:
        """`-b ... -X ...` arguments for kcat."""
        if self.security is None:
            return ["-b", self.bootstrap]
        return self.security.kcat_args(self.bootstrap, user)

    def __enter__(self) -> Broker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def keep_ports(listeners: str, ports: Mapping[str, int]) -> str:
    """`listeners` with each port 0 replaced by the port that listener bound before."""

    def fill(m: re.Match[str]) -> str:
        port = ports.get(m.group(1).upper(), 0)
        return f"{m.group(1)}://{m.group(2)}:{port}" if port else m.group(0)

    return re.sub(r"([A-Za-z0-9_]+)://([^,]*):0(?=,|$)", fill, listeners)
