"""Fixtures for compatibility tests: real clients against a real `odradek serve` process.

- `broker`: one broker for the session. Extra config through indirect parametrization, which
  starts one broker per distinct set of overrides:
      @pytest.mark.parametrize("broker", [{"num.partitions": "3"}], indirect=True)
- `fresh_broker`: a factory for tests that stop, kill or restart a broker; each call starts a
  new broker with its own port and data dir, all stopped at the end of the test:
      b = fresh_broker({"log.segment.bytes": "4096"}); b.kill(); b.start()
- `topic_name`: a topic name unique to the test (also usable as a group id).
- `java`: compiles and runs the programs in compat_tests/java/ (java_harness.py).
- `go_clients`, `node_clients`: the Go (franz-go, sarama) and KafkaJS programs in
  compat_tests/go/ and compat_tests/js/ (polyglot_harness.py).

Every test under compat_tests/ is marked `compat`. When a test fails, the part of each
broker's log written during the test is attached to the report.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from compat_tests.harness import BrokerError, BrokerProcess, unique_name
from compat_tests.java_harness import JavaPrograms
from compat_tests.polyglot_harness import GoPrograms, NodePrograms

_BROKERS = pytest.StashKey[list[tuple[BrokerProcess, int]]]()
_COMPAT_DIR = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _COMPAT_DIR in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.compat)


def _stop_checked(broker: BrokerProcess) -> None:
    """Stop a broker; a running broker that does not exit 0 on SIGTERM is a failure."""
    was_running = broker.running
    status = broker.stop()
    if was_running and status != 0:
        pytest.fail(
            f"broker {broker.bootstrap} exited with status {status} on SIGTERM\n"
            + broker.log_tail(),
            pytrace=False,
        )


@pytest.fixture(scope="session")
def broker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerProcess]:
    overrides: Mapping[str, str] = getattr(request, "param", None) or {}
    proc = BrokerProcess(tmp_path_factory.mktemp("broker"), overrides=overrides)
    proc.start()
    yield proc
    _stop_checked(proc)


@pytest.fixture
def fresh_broker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., BrokerProcess]]:
    started: list[BrokerProcess] = []

    def factory(
        overrides: Mapping[str, str] | None = None, *, start: bool = True, **kwargs: Any
    ) -> BrokerProcess:
        """A new broker (started unless start=False); kwargs go to BrokerProcess."""
        work_dir = tmp_path_factory.mktemp("fresh-broker")
        proc = BrokerProcess(work_dir, overrides=overrides, **kwargs)
        started.append(proc)
        request.node.stash.setdefault(_BROKERS, []).append((proc, 0))
        if start:
            proc.start()
        return proc

    yield factory
    errors = []
    for proc in started:
        try:
            _stop_checked(proc)
        except pytest.fail.Exception as exc:
            errors.append(str(exc))
    if errors:
        pytest.fail("\n".join(errors), pytrace=False)


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    return unique_name(request.node.name)


@pytest.fixture(scope="session")
def java(tmp_path_factory: pytest.TempPathFactory) -> JavaPrograms:
    return JavaPrograms(tmp_path_factory.mktemp("java-classes"))


@pytest.fixture(scope="session")
def go_clients() -> GoPrograms:
    return GoPrograms()


@pytest.fixture(scope="session")
def node_clients() -> NodePrograms:
    return NodePrograms()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    session_broker = getattr(item, "funcargs", {}).get("broker")
    if call.when == "setup" and isinstance(session_broker, BrokerProcess):
        # Remember where the shared broker's log stood when this test began.
        item.stash.setdefault(_BROKERS, []).append((session_broker, session_broker.log_size()))
    if report.failed or (call.excinfo is not None and call.excinfo.errisinstance(BrokerError)):
        for proc, offset in item.stash.get(_BROKERS, []):
            report.sections.append(
                (f"broker {proc.bootstrap} log ({proc.log_path})", proc.log_tail(since=offset))
            )
    return report
