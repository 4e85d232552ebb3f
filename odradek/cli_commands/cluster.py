"""`odradek cluster`: brokers, controller, cluster id and partitions without a leader.

DescribeCluster (key 60, KIP-700) gives the brokers, controller and cluster id (kafka-python
falls back to Metadata on brokers without it); Metadata (key 3) gives every partition's leader
and ISR, from which offline (leaderless) and under-replicated partitions are counted.
"""

from __future__ import annotations

import argparse
from typing import Any

from odradek.cli_commands.common import (
    Closing,
    add_client_options,
    admin_client,
    run_command,
    want_json,
)
from odradek.cli_commands.output import CliError, print_json, print_table


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cluster", help="brokers, controller, cluster id, leaderless partitions")
    add_client_options(p)
    # with --brokers N (odradek/cli.py): serve TLS / SASL between the brokers and to clients
    p.add_argument(
        "--security",
        choices=["ssl", "mtls", "sasl_plaintext", "sasl_ssl"],
        help="with --brokers: serve this listener (throwaway CA in <base-dir>/security, "
        "brokers talk to each other over it) and print the client properties",
    )
    p.add_argument(
        "--mechanism",
        choices=["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"],
        type=str.upper,
        help="with --security sasl_*: the SASL mechanism (default PLAIN)",
    )
    p.add_argument(
        "--user",
        action="append",
        metavar="NAME[:PASSWORD]",
        help="with --security: a SASL user / client certificate (repeatable; default "
        "alice:alice-secret)",
    )
    p.set_defaults(func=run_command(cmd_cluster))


def _summary(cluster: dict[str, Any], topics: list[dict[str, Any]]) -> dict[str, Any]:
    offline = []
    under = []
    partitions = 0
    for topic in topics:
        for p in topic.get("partitions") or []:
            partitions += 1
            entry = {
                "topic": topic["name"],
                "partition": p["partition_index"],
                "leader": p["leader_id"],
                "replicas": list(p["replica_nodes"]),
                "isr": list(p["isr_nodes"]),
            }
            if p["leader_id"] < 0:
                offline.append(entry)
            elif len(p["isr_nodes"]) < len(p["replica_nodes"]):
                under.append(entry)
    brokers = sorted(
        (
            {
                "id": b["broker_id"],
                "host": b["host"],
                "port": b["port"],
                "rack": b.get("rack"),
                "fenced": bool(b.get("is_fenced")),
            }
            for b in cluster.get("brokers") or []
        ),
        key=lambda b: b["id"],
    )
    return {
        "cluster_id": cluster.get("cluster_id"),
        "controller_id": cluster.get("controller_id"),
        "brokers": brokers,
        "topics": len(topics),
        "partitions": partitions,
        "offline_partitions": sorted(offline, key=lambda e: (e["topic"], e["partition"])),
        "under_replicated_partitions": sorted(under, key=lambda e: (e["topic"], e["partition"])),
    }


def cmd_cluster(args: argparse.Namespace) -> None:
    if args.security or args.mechanism or args.user:
        raise CliError("--security, --mechanism and --user go with --brokers N")
    with Closing(admin_client(args)) as admin:
        cluster = admin.describe_cluster()
        topics = admin.describe_topics(None)
    summary = _summary(cluster, [t for t in topics if not t.get("error_code")])
    if want_json(args):
        print_json(summary)
        return
    controller = summary["controller_id"]
    print(f"Cluster id:  {summary['cluster_id']}")
    print(f"Controller:  {controller if controller is not None and controller >= 0 else 'none'}")
    print(
        f"Topics:      {summary['topics']}  Partitions: {summary['partitions']}  "
        f"Offline: {len(summary['offline_partitions'])}  "
        f"Under-replicated: {len(summary['under_replicated_partitions'])}"
    )
    print()
    print_table(
        ["BROKER", "HOST", "PORT", "RACK", "CONTROLLER"],
        [
            [b["id"], b["host"], b["port"], b["rack"], "yes" if b["id"] == controller else ""]
            for b in summary["brokers"]
        ],
    )
    if summary["offline_partitions"]:
        print()
        print("Partitions without a leader:")
        print_table(
            ["TOPIC", "PARTITION", "REPLICAS", "ISR"],
            [
                [e["topic"], e["partition"], e["replicas"], e["isr"]]
                for e in summary["offline_partitions"]
            ],
        )
