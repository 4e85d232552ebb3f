"""`odradek client-metrics --list|--describe|--alter|--delete`: KIP-714 client metrics
subscriptions, as Kafka's kafka-client-metrics.sh (ClientMetricsCommand) manages them.

A subscription is a ClientMetrics config resource: `--metrics` (metric name prefixes, `*` for
all), `--interval` (push interval in ms, 100..3600000) and `--match` (selectors `k=regex`:
client_id, client_instance_id, client_software_name, client_software_version,
client_source_address, client_source_port; none matches every client). Clients that a
subscription matches push those metrics every interval; the broker shows them on its Prometheus
endpoint as `odradek_client_*` series.

    odradek client-metrics --alter --name all --metrics '*' --interval 1000
    odradek client-metrics --alter --name apps --metrics org.apache.kafka.producer. \\
        --match 'client_id=app-.*,client_software_name=librdkafka'
    odradek client-metrics --describe [--name apps]
    odradek client-metrics --list
    odradek client-metrics --delete --name apps

`--alter` sets the keys given (an empty value deletes the key, as Kafka's tool), through
IncrementalAlterConfigs; `--generate-name` names a new subscription with a random UUID.
`--delete` removes every key of the subscription. `--describe` prints Kafka's lines
(`Client metrics configs for apps are:` then `  key=value`); `--list` the names
(ListConfigResources).
"""

from __future__ import annotations

import argparse
import uuid
from typing import Any

from odradek.cli_commands.common import (
    Closing,
    add_client_options,
    admin_client,
    error_name,
    run_command,
    want_json,
)
from odradek.cli_commands.output import CliError, print_json

CLIENT_METRICS = 16
SET, DELETE = 0, 1


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "client-metrics",
        help="KIP-714 client metrics subscriptions (kafka-client-metrics.sh)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_client_options(p)
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--alter", action="store_true", help="create or change a subscription")
    mode.add_argument("--delete", action="store_true", help="delete a subscription")
    mode.add_argument("--describe", action="store_true", help="show subscriptions' configs")
    mode.add_argument("--list", action="store_true", help="list subscription names")
    p.add_argument("--name", help="name of the client metrics subscription")
    p.add_argument(
        "--generate-name", action="store_true", help="name a new subscription with a UUID"
    )
    p.add_argument("--interval", type=int, metavar="MS", help="metrics push interval (ms)")
    p.add_argument("--metrics", metavar="m1,m2", help="metric name prefixes ('*': all)")
    p.add_argument("--match", metavar="k1=v1,k2=v2", help="client selectors (regexes)")
    p.set_defaults(func=run_command(cmd_client_metrics))


def _send(admin: Any, request: Any) -> Any:
    async def go() -> Any:
        return await admin._manager.send(request)

    return admin._manager.run(go)


def _check_args(args: argparse.Namespace) -> None:
    """ClientMetricsCommandOptions.checkArgs, with its messages."""
    given = [
        opt
        for opt, value in (
            ("--generate-name", args.generate_name),
            ("--interval", args.interval is not None),
            ("--match", args.match is not None),
            ("--metrics", args.metrics is not None),
        )
        if value
    ]
    if not args.alter and given:
        action = "delete" if args.delete else "describe" if args.describe else "list"
        raise CliError(f"Option --{action} can't be used with {', '.join(given)}")
    if args.list and args.name is not None:
        raise CliError("Option --list can't be used with --name")
    if args.alter and (args.name is not None) == bool(args.generate_name):
        raise CliError("One of --name or --generate-name must be specified with --alter.")
    if args.delete and args.name is None:
        raise CliError("A client metrics resource name must be specified with --delete.")


def _raise_for(code: int, message: str | None) -> None:
    if code:
        name = error_name(code)
        raise CliError(f"{name}: {message}" if message else name)


def list_names(admin: Any) -> list[str]:
    from kafka.protocol.admin import ListConfigResourcesRequest as Req

    resp = _send(admin, Req(resource_types=[CLIENT_METRICS]))
    _raise_for(resp.error_code, None)
    return sorted(
        r.resource_name
        for r in resp.config_resources
        if getattr(r, "resource_type", CLIENT_METRICS) == CLIENT_METRICS
    )


def describe(admin: Any, name: str) -> dict[str, str | None]:
    from kafka.protocol.admin import DescribeConfigsRequest as Req

    resp = _send(
        admin,
        Req(
            resources=[
                Req.DescribeConfigsResource(
                    resource_type=CLIENT_METRICS, resource_name=name, configuration_keys=None
                )
            ],
            include_synonyms=False,
            include_documentation=False,
        ),
    )
    result = resp.results[0]
    _raise_for(result.error_code, result.error_message)
    return {c.name: c.value for c in result.configs}


def alter(admin: Any, name: str, ops: list[tuple[str, str | None, int]]) -> None:
    from kafka.protocol.admin import IncrementalAlterConfigsRequest as Req

    resource = Req.AlterConfigsResource(
        resource_type=CLIENT_METRICS,
        resource_name=name,
        configs=[
            Req.AlterConfigsResource.AlterableConfig(name=k, config_operation=op, value=v)
            for k, v, op in ops
        ],
    )
    resp = _send(admin, Req(resources=[resource], validate_only=False))
    for r in resp.responses:
        _raise_for(r.error_code, r.error_message)


def cmd_client_metrics(args: argparse.Namespace) -> int:
    _check_args(args)
    with Closing(admin_client(args)) as admin:
        if args.list:
            names = list_names(admin)
            if want_json(args):
                print_json(names)
            elif names:
                print("\n".join(names))
            return 0
        if args.describe:
            names = [args.name] if args.name is not None else list_names(admin)
            found = {n: describe(admin, n) for n in names}
            if want_json(args):
                print_json(found)
                return 0
            for n, described in found.items():
                print(f"Client metrics configs for {n} are:")
                for k, v in described.items():
                    print(f"  {k}={v}")
            return 0
        if args.delete:
            ops: list[tuple[str, str | None, int]] = [
                (k, v, DELETE) for k, v in describe(admin, args.name).items()
            ]
            alter(admin, args.name, ops)
            message = f"Deleted client metrics config for {args.name}."
        else:
            name = str(uuid.uuid4()) if args.generate_name else args.name
            configs: dict[str, str] = {}
            if args.interval is not None:
                configs["interval.ms"] = str(args.interval)
            if args.metrics is not None:
                configs["metrics"] = ",".join(p.strip() for p in args.metrics.split(","))
            if args.match is not None:
                configs["match"] = ",".join(p.strip() for p in args.match.split(","))
            ops = [(k, v, SET if v else DELETE) for k, v in configs.items()]
            alter(admin, name, ops)
            message = f"Altered client metrics config for {name}."
    if want_json(args):
        print_json({"result": "ok"})
    else:
        print(message)
    return 0
