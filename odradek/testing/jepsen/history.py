"""The queue workload's history: Jepsen's Kafka "queue" operations over the chaos `History`.

Every client operation is one op of kind `f`, recorded when invoked and again when its outcome is
known (`ok` it happened, `fail` it certainly did not, `info` unknown). Keys are partitions of
the workload's topic (ints); values are unique strings. A client process's ops (txn, end-txn,
assign, commit) also carry "client": the library it ran on, "librdkafka" or "java" (Apache
Kafka's kafka-clients; absent means librdkafka). The ops:

    txn         {"process", "txn": bool, "mops": [...]}: a list of micro-ops run in order, in
                a Kafka transaction when "txn" is true (KIP-98), else one plain send or poll.
                Micro-ops, as completed:
                    ["send", key, value, offset | None]   offset from the acknowledgement
                    ["poll", key, [[offset, value], ...]] records of one key in one poll
                A transaction's completion adds "decision": "commit" | "abort" (what took
                effect when ok; fail means it certainly did not commit).
    end-txn     {"process", "op": invoke index}: ok, recorded just before a transaction's
                commit is sent (EndTxn); a read_committed read finished earlier cannot have
                seen it.
    assign      {"process", "keys": [...]}: a consumer's assignment changed (assign or a
                subscribe's rebalance); its position may legitimately move.
    commit      {"process", "offsets": {key: offset}}: a consumer group offset commit.
    committed   {"offsets": {key: offset}}: a monitor's OffsetFetch of the group.
    hw          {"hw": {key: high watermark}, "epochs": {key: leader epoch}}: a monitor's
                ListOffsets (latest, read_uncommitted) and the leader epoch each answer
                came under (KIP-320; -1 unknown).
    final       {"records": {key: [[offset, value], ...]}}: read_committed read of every key
                to its end after the faults healed.
    final-uncommitted
                {"records": ...}: the same read with read_uncommitted (aborted writes too);
                never a read of the workload, only what the log holds at each offset.
    batches     {"batches": {key: [[base offset, last offset, producer id, producer epoch,
                base sequence, transactional, control, partition leader epoch], ...]}}:
                every batch header of every key, read after the faults healed (a Fetch
                of each key's leader); never a read of the workload.
    nemesis     {"fault", "phase"}: a fault began or ended (info, never judged).
"""

from __future__ import annotations

from typing import Any

from odradek.testing.chaos.history import FAIL, INFO, INVOKE, OK, History, Op

Mop = list[Any]  # ["send", key, value, offset] | ["poll", key, [[offset, value], ...]]

__all__ = ["FAIL", "INFO", "INVOKE", "OK", "History", "Mop", "Op"]
