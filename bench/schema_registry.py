"""`python -m bench.schema_registry`: the built-in Schema Registry's registrations per second and
lookup latency, over plain HTTP/1.1 keep-alive (http.client, no client-side cache).

Rows: registering `--schemas` distinct Avro schemas, each a new version of one subject under
BACKWARD (every registration checks compatibility against the latest version and is appended to
`_schemas`); GET /schemas/ids/{id}; POST /subjects/{s} (lookup by schema). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import time

from odradek.testing.broker import Broker

HEADERS = {"Content-Type": "application/vnd.schemaregistry.v1+json"}


def schema(i: int) -> str:
    fields = [{"name": "a", "type": "int"}]
    fields += [{"name": f"f{j}", "type": "string", "default": ""} for j in range(i)]
    return json.dumps({"type": "record", "name": "R", "fields": fields})


def call(conn: http.client.HTTPConnection, method: str, path: str, body: object = None) -> object:
    data = None if body is None else json.dumps(body)
    conn.request(method, path, data, HEADERS)
    resp = conn.getresponse()
    out = json.loads(resp.read())
    if resp.status != 200:
        raise RuntimeError(f"{method} {path}: {resp.status} {out}")
    return out


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered) * 1e3, ordered[int(len(ordered) * 0.99) - 1] * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--schemas", type=int, default=200)
    parser.add_argument("--lookups", type=int, default=2000)
    args = parser.parse_args()
    with Broker(schema_registry=True) as broker:
        host, port = broker.schema_registry_url.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        times: list[float] = []
        ids: list[int] = []
        for i in range(args.schemas):
            start = time.perf_counter()
            reply = call(conn, "POST", "/subjects/s/versions", {"schema": schema(i)})
            times.append(time.perf_counter() - start)
            assert isinstance(reply, dict)
            ids.append(int(reply["id"]))
        rows = [("register (new version)", args.schemas / sum(times), *percentiles(times))]
        for name, method, path_of, body_of in (
            ("GET /schemas/ids/{id}", "GET", lambda n: f"/schemas/ids/{ids[n % len(ids)]}", None),
            ("POST /subjects/{s} lookup", "POST", lambda n: "/subjects/s", True),
        ):
            times = []
            for n in range(args.lookups):
                body = {"schema": schema(n % args.schemas)} if body_of else None
                start = time.perf_counter()
                call(conn, method, path_of(n), body)
                times.append(time.perf_counter() - start)
            rows.append((name, args.lookups / sum(times), *percentiles(times)))
        conn.close()
    print("| operation | per second | p50 ms | p99 ms |")
    print("|---|---:|---:|---:|")
    for name, rate, p50, p99 in rows:
        print(f"| {name} | {rate:,.0f} | {p50:.2f} | {p99:.2f} |")


if __name__ == "__main__":
    main()
