"""`odradek.testing.Broker` stops without "Task was destroyed but it is pending!" (issue 13).

A task the broker left behind at stop (a replication wait cancelled but not yet run, an
internal-topic creation, anything a handler started) used to be destroyed with the loop; the
loop thread now cancels and finishes every remaining task before it closes the loop.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import asyncio, gc

    from kafka import KafkaConsumer, KafkaProducer

    from odradek.testing import Broker
    from odradek.testing.polling import poll_until

    async def forever():
        await asyncio.Event().wait()

    KEEP = []  # referenced, as the broker's own tasks are: only the loop's close could lose them

    def leave_tasks_behind(server):
        loop = asyncio.get_running_loop()
        KEEP.append(loop.create_task(forever(), name="left-running"))
        KEEP.append(loop.create_task(forever(), name="cancelled-not-run"))
        KEEP[-1].cancel()

    broker = Broker(topics={"t": 2}, config={"group.initial.rebalance.delay.ms": 0}).start()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    producer.send("t", b"x").get(timeout=30)
    consumer = KafkaConsumer("t", bootstrap_servers=broker.bootstrap, group_id="g",
                             auto_offset_reset="earliest", consumer_timeout_ms=100)
    assert [r.value for r in poll_until(consumer, bool, 30)] == [b"x"], consumer.assignment()
    consumer.commit()
    broker.restart(abrupt=True)
    broker.call(leave_tasks_behind)
    broker.stop()  # clients still open: their connections are cut by the stop
    gc.collect()
    print("stopped", flush=True)
    """
)


def test_broker_stop_leaves_no_pending_task() -> None:
    proc = subprocess.run(
        [sys.executable, "-W", "ignore::DeprecationWarning", "-c", SCRIPT],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "stopped" in proc.stdout
    assert "Task was destroyed but it is pending" not in proc.stderr, proc.stderr
