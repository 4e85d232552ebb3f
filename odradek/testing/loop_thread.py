"""`LoopThread`: an asyncio event loop on its own daemon thread, for the in-process `Broker` and
`Cluster` that a (synchronous) test drives from its own thread.

    thread = LoopThread("odradek-broker", timeout=30.0)
    thread.start(boot, teardown)          # boot() runs on the loop; its exception is re-raised
    thread.call(fn, *args)                # fn(*args) on the loop, a coroutine result awaited
    thread.stop()                         # teardown() runs on the loop, then the thread ends

`SharedSlot` has the same four calls but runs on one event-loop thread that every in-process
broker asking for it shares (`Broker(shared_loop=True)`): no thread or event loop is created or
joined per broker, which is most of what starting and stopping an in-process broker costs once
its data dir is on tmpfs. Each slot's calls run under its own owner tag, so the tasks a broker
started (its connections, coordinators, timers' tasks) are found, cancelled and awaited when
its slot stops, as closing a loop of its own would. The thread itself is started on first use
and ends with `stop_shared_loop()` (the pytest plugin calls it at the end of the session) or at
interpreter exit.
"""

from __future__ import annotations

import asyncio
import atexit
import contextvars
import logging
import sys
import threading
import time
import traceback
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar, overload

AsyncStep = Callable[[], Awaitable[None]]
T = TypeVar("T")  # what a call's function returns (or its coroutine, awaited)

log = logging.getLogger(__name__)

STALL_S = 5.0  # a loop that runs no callback for this long is reported, with its stack


class _StallWatch:
    """Reports an event loop that stops turning: every second it asks the loop to answer a
    ping; when a ping has waited STALL_S, the loop thread's Python stack goes to the log (a
    warning, which pytest shows with a failing test), and again every STALL_S while it stays
    stuck. Brokers sharing one loop thread all stop answering when one of them blocks it; this
    says where."""

    def __init__(self, name: str, loop: asyncio.AbstractEventLoop, thread: threading.Thread):
        self.name, self.loop, self.thread = name, loop, thread
        self.asked: float | None = None  # when the ping the loop has not answered yet was sent
        self.stopped = threading.Event()
        threading.Thread(target=self._watch, daemon=True, name=f"{name}-stall-watch").start()

    def _answer(self) -> None:
        self.asked = None

    def _watch(self) -> None:
        reported = 0.0
        while not self.stopped.wait(1.0):
            now = time.monotonic()
            asked = self.asked
            if asked is None:
                self.asked = now
                try:
                    self.loop.call_soon_threadsafe(self._answer)
                except RuntimeError:  # the loop closed
                    return
                continue
            stuck = now - asked
            if stuck < STALL_S or now - reported < STALL_S:
                continue
            reported = now
            frame = sys._current_frames().get(self.thread.ident or -1)
            stack = "".join(traceback.format_stack(frame)) if frame is not None else "(gone)"
            log.warning("%s: event loop stuck for %.1f s in:\n%s", self.name, stuck, stack)


class LoopThread:
    def __init__(self, name: str, timeout: float) -> None:
        self.name = name
        self.timeout = timeout  # for start, each call and stop
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._watch: _StallWatch | None = None

    @property
    def running(self) -> bool:
        return self._loop is not None

    def start(self, boot: AsyncStep, teardown: AsyncStep | None = None) -> None:
        """Start the thread and run `boot` on its loop; when `boot` raises, `teardown` runs,
        the thread ends and the exception is raised here."""
        ready: Future[None] = Future()
        loop = asyncio.new_event_loop()
        thread = threading.Thread(
            target=self._run, args=(loop, ready, boot, teardown), daemon=True, name=self.name
        )
        self._loop, self._thread = loop, thread
        thread.start()
        try:
            ready.result(self.timeout)
        except BaseException:
            thread.join(self.timeout)
            self._loop = self._thread = None
            raise
        self._watch = _StallWatch(self.name, loop, thread)

    @staticmethod
    def _run(
        loop: asyncio.AbstractEventLoop,
        ready: Future[None],
        boot: AsyncStep,
        teardown: AsyncStep | None,
    ) -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(boot())
        except BaseException as exc:  # report start failures to the caller
            ready.set_exception(exc)
            if teardown is not None:
                loop.run_until_complete(teardown())
            loop.close()
            return
        ready.set_result(None)
        loop.run_forever()
        if teardown is not None:
            loop.run_until_complete(teardown())
        LoopThread._finish_tasks(loop)
        loop.close()

    @staticmethod
    def _finish_tasks(loop: asyncio.AbstractEventLoop) -> None:
        """Cancel the tasks still pending (something the stopped broker started and left, or
        cancelled without awaiting) and let them end, as asyncio.run does: a task closed with
        its loop is reported as "Task was destroyed but it is pending!" when collected."""
        tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())

    @overload
    def call(self, fn: Callable[..., Coroutine[Any, Any, T]], *args: Any) -> T: ...
    @overload
    def call(self, fn: Callable[..., T], *args: Any) -> T: ...
    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run `fn(*args)` on the loop and return its result (a coroutine is awaited as a task).

        A plain callback and a lock rather than run_coroutine_threadsafe: that wraps every call
        in a task and chains two futures, twice the cost of a call (~150 us against ~70 us
        here), paid several times by every in-process broker's start, use and stop."""
        loop = self._loop
        assert loop is not None, f"{self.name} is not running"
        done = threading.Lock()
        done.acquire()
        outcome: list[tuple[Any, BaseException | None]] = []

        def finish(result: Any, exc: BaseException | None) -> None:
            outcome.append((result, exc))
            done.release()

        def finished(task: asyncio.Task[Any]) -> None:
            if task.cancelled():
                finish(None, asyncio.CancelledError())
            elif (exc := task.exception()) is not None:
                finish(None, exc)
            else:
                finish(task.result(), None)

        def run() -> None:
            try:
                result = fn(*args)
            except BaseException as exc:
                finish(None, exc)
                return
            if asyncio.iscoroutine(result):
                loop.create_task(result).add_done_callback(finished)
            else:
                finish(result, None)

        loop.call_soon_threadsafe(run)
        if not done.acquire(timeout=self.timeout):
            raise TimeoutError(f"{self.name}: no answer from the loop within {self.timeout} s")
        result, exc = outcome[0]
        if exc is not None:
            raise exc
        return result

    def stop(self) -> None:
        """Stop the loop (the teardown given to start runs on it) and wait for the thread."""
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        if self._watch is not None:
            self._watch.stopped.set()
            self._watch = None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(self.timeout)


# -- one loop thread shared by many brokers ------------------------------------------------------

SHARED_NAME = "odradek-brokers"
SHARED_TIMEOUT_S = 30.0

# the SharedSlot a piece of work on the shared loop belongs to; tasks inherit it from the code
# that created them (a task copies its creator's context; so does a callback scheduled with
# call_soon or add_reader, hence a listener's accepted connections belong to its broker)
_OWNER: contextvars.ContextVar[SharedSlot | None] = contextvars.ContextVar(
    "odradek_loop_owner", default=None
)
_shared: LoopThread | None = None
_owned: dict[SharedSlot, set[asyncio.Task[Any]]] = {}  # touched on the shared loop only
_shared_lock = threading.Lock()


def _task_factory(
    loop: asyncio.AbstractEventLoop,
    coro: Any,
    context: contextvars.Context | None = None,
) -> asyncio.Task[Any]:
    task: asyncio.Task[Any] = asyncio.Task(coro, loop=loop, context=context)
    owner = _OWNER.get() if context is None else context.get(_OWNER)
    if owner is not None:
        tasks = _owned.setdefault(owner, set())
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    return task


def shared_loop() -> LoopThread:
    """The process-wide loop thread of `SharedSlot`s, started on first use."""
    global _shared
    with _shared_lock:
        if _shared is None or not _shared.running:

            async def boot() -> None:
                asyncio.get_running_loop().set_task_factory(_task_factory)

            thread = LoopThread(SHARED_NAME, SHARED_TIMEOUT_S)
            thread.start(boot)
            _shared = thread
        return _shared


def stop_shared_loop() -> None:
    """End the shared loop thread (tasks still pending are cancelled and finished first); the
    next shared broker starts a new one. Harmless when it is not running."""
    global _shared
    with _shared_lock:
        thread, _shared = _shared, None
    if thread is not None:
        thread.stop()
    _owned.clear()


def shared_loop_running() -> bool:
    return _shared is not None and _shared.running


atexit.register(stop_shared_loop)


class SharedSlot:
    """One broker's place on the shared loop thread, with LoopThread's start/call/stop."""

    def __init__(self, name: str, timeout: float) -> None:
        self.name = name
        self.timeout = timeout
        self._thread: LoopThread | None = None
        self._teardown: AsyncStep | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.running

    def _owned_call(self, thread: LoopThread, fn: Callable[..., Any], *args: Any) -> Any:
        def as_owner(*a: Any) -> Any:
            _OWNER.set(self)  # in the context of the task `call` runs this in
            return fn(*a)

        return thread.call(as_owner, *args)

    def start(self, boot: AsyncStep, teardown: AsyncStep | None = None) -> None:
        """Run `boot` on the shared loop as this slot's; when it raises, `teardown` runs, the
        slot's tasks are ended and the exception is raised here."""
        thread = shared_loop()
        try:
            self._owned_call(thread, boot)
        except BaseException:
            self._end(thread, teardown)
            raise
        self._thread, self._teardown = thread, teardown

    @overload
    def call(self, fn: Callable[..., Coroutine[Any, Any, T]], *args: Any) -> T: ...
    @overload
    def call(self, fn: Callable[..., T], *args: Any) -> T: ...
    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run `fn(*args)` on the shared loop as this slot's (a coroutine is awaited)."""
        thread = self._thread
        assert thread is not None, f"{self.name} is not running"
        return self._owned_call(thread, fn, *args)

    def stop(self) -> None:
        """Run the teardown given to start, then cancel and finish this slot's tasks."""
        thread, teardown = self._thread, self._teardown
        self._thread = self._teardown = None
        if thread is not None and thread.running:
            self._end(thread, teardown)

    def _end(self, thread: LoopThread, teardown: AsyncStep | None) -> None:
        async def end() -> None:  # one trip to the loop thread for both steps
            try:
                if teardown is not None:
                    _OWNER.set(self)
                    await teardown()
            finally:
                await self._finish_tasks()

        thread.call(end)

    async def _finish_tasks(self) -> None:
        """Cancel what this slot left running and let it end, as LoopThread does at close."""
        current = asyncio.current_task()
        tasks = [t for t in _owned.pop(self, set()) if t is not current and not t.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=self.timeout)
