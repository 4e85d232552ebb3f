"""`odradek transactions list|describe|describe-producers|abort|find-hanging`, as
kafka-transactions.sh (KIP-664).

ListTransactions (key 66) asks every broker for the transactions its coordinator holds;
DescribeTransactions (key 65) describes one transactional id at its coordinator;
DescribeProducers (key 61) shows a partition's active producers and where their open transaction
starts. `abort` ends a hanging transaction on one partition as Kafka's tool does: it finds the
producer whose open transaction starts at `--start-offset` (DescribeProducers), then has the
partition leader write an ABORT marker for it (WriteTxnMarkers, key 27); `--producer-id`,
`--producer-epoch` and `--coordinator-epoch` name the producer directly instead.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from odradek.cli_commands.common import (
    Closing,
    add_client_options,
    admin_client,
    run_command,
    want_json,
)
from odradek.cli_commands.output import CliError, print_json, print_table

# kafka-transactions.sh find-hanging's default: transaction.max.timeout.ms (15 minutes)
DEFAULT_MAX_TRANSACTION_TIMEOUT_MS = 900000


def register(sub: argparse._SubParsersAction) -> None:
    txn = sub.add_parser(
        "transactions", help="list, describe and abort transactions (kafka-transactions)"
    )
    add_client_options(txn)
    cmds = txn.add_subparsers(dest="transactions_command", metavar="COMMAND")
    cmds.required = True

    p = cmds.add_parser("list", help="transactions known to the coordinators")
    add_client_options(p)
    p.add_argument(
        "--duration-filter",
        type=int,
        metavar="MS",
        help="only transactions running longer than MS milliseconds",
    )
    p.set_defaults(func=run_command(cmd_list))

    p = cmds.add_parser("describe", help="the coordinator's state of a transactional id")
    add_client_options(p)
    p.add_argument("--transactional-id", required=True, metavar="ID")
    p.set_defaults(func=run_command(cmd_describe))

    p = cmds.add_parser(
        "describe-producers", help="active producers of a partition and their open transactions"
    )
    add_client_options(p)
    p.add_argument("--topic", required=True, metavar="NAME")
    p.add_argument("--partition", required=True, type=int, metavar="P")
    p.add_argument(
        "--broker-id", type=int, metavar="ID", help="ask this replica (default: the leader)"
    )
    p.set_defaults(func=run_command(cmd_describe_producers))

    p = cmds.add_parser("abort", help="abort a hanging transaction on one partition")
    add_client_options(p)
    p.add_argument("--topic", required=True, metavar="NAME")
    p.add_argument("--partition", required=True, type=int, metavar="P")
    p.add_argument(
        "--start-offset",
        type=int,
        metavar="N",
        help="the first offset of the transaction to abort (see describe-producers)",
    )
    p.add_argument("--producer-id", type=int, metavar="ID", help="instead of --start-offset")
    p.add_argument("--producer-epoch", type=int, metavar="E", help="with --producer-id")
    p.add_argument(
        "--coordinator-epoch", type=int, metavar="E", help="with --producer-id (default -1)"
    )
    p.set_defaults(func=run_command(cmd_abort))

    p = cmds.add_parser(
        "find-hanging", help="open transactions older than the maximum transaction timeout"
    )
    add_client_options(p)
    p.add_argument(
        "--max-transaction-timeout",
        type=int,
        default=DEFAULT_MAX_TRANSACTION_TIMEOUT_MS,
        metavar="MS",
        help="the brokers' transaction.max.timeout.ms (default 900000)",
    )
    p.set_defaults(func=run_command(cmd_find_hanging))


def _state(value: Any) -> str:
    return str(getattr(value, "value", value))


def cmd_list(args: argparse.Namespace) -> None:
    with Closing(admin_client(args)) as admin:
        by_broker = admin.list_transactions(duration_filter_ms=args.duration_filter)
    rows = [
        {
            "transactional_id": t.transactional_id,
            "coordinator": broker,
            "producer_id": t.producer_id,
            "state": _state(t.state),
        }
        for broker, listings in sorted(by_broker.items())
        for t in sorted(listings, key=lambda t: t.transactional_id)
    ]
    if want_json(args):
        print_json(rows)
        return
    print_table(
        ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"],
        [[r["transactional_id"], r["coordinator"], r["producer_id"], r["state"]] for r in rows],
    )


def cmd_describe(args: argparse.Namespace) -> None:
    with Closing(admin_client(args)) as admin:
        found = admin.describe_transactions([args.transactional_id])
    d = found[args.transactional_id]
    start = d.transaction_start_time_ms
    doc = {
        "coordinator_id": d.coordinator_id,
        "transactional_id": args.transactional_id,
        "producer_id": d.producer_id,
        "producer_epoch": d.producer_epoch,
        "state": _state(d.state),
        "transaction_timeout_ms": d.transaction_timeout_ms,
        "transaction_start_time_ms": start,
        "transaction_duration_ms": int(time.time() * 1000) - start if start >= 0 else -1,
        "topic_partitions": [f"{tp.topic}-{tp.partition}" for tp in sorted(d.topic_partitions)],
    }
    if want_json(args):
        print_json(doc)
        return
    print_table(
        [
            "CoordinatorId",
            "TransactionalId",
            "ProducerId",
            "ProducerEpoch",
            "TransactionState",
            "TransactionTimeoutMs",
            "CurrentTransactionStartTimeMs",
            "TransactionDurationMs",
            "TopicPartitions",
        ],
        [
            [
                doc["coordinator_id"],
                doc["transactional_id"],
                doc["producer_id"],
                doc["producer_epoch"],
                doc["state"],
                doc["transaction_timeout_ms"],
                start if start >= 0 else "None",
                doc["transaction_duration_ms"] if start >= 0 else "None",
                ",".join(doc["topic_partitions"]) or "-",
            ]
        ],
    )


def _producers(admin: Any, topic: str, partition: int, broker_id: int | None) -> list[Any]:
    from kafka import TopicPartition

    tp = TopicPartition(topic, partition)
    found = admin.describe_producers([tp], broker_id=broker_id)
    return list(found[tp].active_producers)


def cmd_describe_producers(args: argparse.Namespace) -> None:
    with Closing(admin_client(args)) as admin:
        producers = _producers(admin, args.topic, args.partition, args.broker_id)
    rows = [
        {
            "producer_id": p.producer_id,
            "producer_epoch": p.producer_epoch,
            "coordinator_epoch": p.coordinator_epoch,
            "last_sequence": p.last_sequence,
            "last_timestamp": p.last_timestamp,
            "current_transaction_start_offset": p.current_transaction_start_offset,
        }
        for p in producers
    ]
    if want_json(args):
        print_json(rows)
        return
    print_table(
        [
            "ProducerId",
            "ProducerEpoch",
            "LatestCoordinatorEpoch",
            "LastSequence",
            "LastTimestamp",
            "CurrentTransactionStartOffset",
        ],
        [
            [
                r["producer_id"],
                r["producer_epoch"],
                r["coordinator_epoch"],
                r["last_sequence"],
                r["last_timestamp"],
                r["current_transaction_start_offset"]
                if r["current_transaction_start_offset"] >= 0
                else "None",
            ]
            for r in rows
        ],
    )


def cmd_abort(args: argparse.Namespace) -> int:
    from kafka import TopicPartition
    from kafka.admin import AbortTransactionSpec

    by_producer = args.producer_id is not None
    if by_producer == (args.start_offset is not None):
        raise CliError("give either --start-offset or --producer-id with --producer-epoch")
    tp = TopicPartition(args.topic, args.partition)
    with Closing(admin_client(args)) as admin:
        if by_producer:
            if args.producer_epoch is None:
                raise CliError("--producer-id needs --producer-epoch")
            producer_id, epoch = args.producer_id, args.producer_epoch
            coordinator_epoch = -1 if args.coordinator_epoch is None else args.coordinator_epoch
        else:
            if args.producer_epoch is not None or args.coordinator_epoch is not None:
                raise CliError("--producer-epoch and --coordinator-epoch go with --producer-id")
            matches = [
                p
                for p in _producers(admin, args.topic, args.partition, None)
                if p.current_transaction_start_offset == args.start_offset
            ]
            if not matches:
                raise CliError(
                    f"Could not find any open transactions starting at offset "
                    f"{args.start_offset} on partition {args.topic}-{args.partition}"
                )
            if len(matches) > 1:
                ids = ", ".join(str(p.producer_id) for p in matches)
                raise CliError(
                    f"Found multiple open transactions starting at offset {args.start_offset} "
                    f"on partition {args.topic}-{args.partition} (producers {ids})"
                )
            (found,) = matches
            producer_id, epoch = found.producer_id, found.producer_epoch
            coordinator_epoch = max(found.coordinator_epoch, 0)
        admin.abort_transaction(AbortTransactionSpec(tp, producer_id, epoch, coordinator_epoch))
    done = {
        "topic": args.topic,
        "partition": args.partition,
        "producer_id": producer_id,
        "producer_epoch": epoch,
        "coordinator_epoch": coordinator_epoch,
    }
    if want_json(args):
        print_json(done)
    else:
        print(
            f"Aborted the transaction of producer {producer_id} (epoch {epoch}) "
            f"on partition {args.topic}-{args.partition}."
        )
    return 0


def cmd_find_hanging(args: argparse.Namespace) -> None:
    with Closing(admin_client(args)) as admin:
        hanging = admin.find_hanging_transactions(
            max_transaction_timeout_ms=args.max_transaction_timeout
        )
    rows = [
        {
            "transactional_id": h["transactional_id"],
            "coordinator": h["coordinator_id"],
            "producer_id": h["producer_id"],
            "producer_epoch": h["producer_epoch"],
            "state": h["state"],
            "duration_ms": h["age_ms"],
            "topic_partitions": [f"{tp.topic}-{tp.partition}" for tp in h["topic_partitions"]],
        }
        for h in hanging
    ]
    if want_json(args):
        print_json(rows)
        return
    print_table(
        [
            "TransactionalId",
            "Coordinator",
            "ProducerId",
            "ProducerEpoch",
            "TransactionState",
            "TransactionDurationMs",
            "TopicPartitions",
        ],
        [
            [
                r["transactional_id"],
                r["coordinator"],
                r["producer_id"],
                r["producer_epoch"],
                r["state"],
                r["duration_ms"],
                ",".join(r["topic_partitions"]) or "-",
            ]
            for r in rows
        ],
    )
