"""`LoopThread`: an asyncio event loop on its own daemon thread, for the in-process `Broker` and
`Cluster` that a (synchronous) test drives from its own thread.

    thread = LoopThread("odradek-broker", timeout=30.0)
    thread.start(boot, teardown)          # boot() runs on the loop; its exception is re-raised
    thread.call(fn, *args)                # fn(*args) on the loop, a coroutine result awaited
    thread.stop()                         # teardown() runs on the loop, then the thread ends
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar, overload

AsyncStep = Callable[[], Awaitable[None]]
T = TypeVar("T")  # what a call's function returns (or its coroutine, awaited)


class LoopThread:
    def __init__(self, name: str, timeout: float) -> None:
        self.name = name
        self.timeout = timeout  # for start, each call and stop
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

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
        """Run `fn(*args)` on the loop and return its result (a coroutine is awaited)."""
        loop = self._loop
        assert loop is not None, f"{self.name} is not running"

        async def runner() -> Any:
            result = fn(*args)
            if asyncio.iscoroutine(result):
                result = await result
            return result

        return asyncio.run_coroutine_threadsafe(runner(), loop).result(self.timeout)

    def stop(self) -> None:
        """Stop the loop (the teardown given to start runs on it) and wait for the thread."""
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(self.timeout)
