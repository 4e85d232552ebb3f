"""Dependency cycles between transactions, found as Elle finds them (Kyle Kingsbury's Elle,
applied by Jepsen to Kafka): from each key's version order (its offsets) and what each
transaction wrote and read, build a graph with edges

    ww  T1 -> T2: T2 wrote the next version of a key after T1's version
    wr  T1 -> T2: T2 read a version T1 wrote
    rw  T1 -> T2: T1 read a version of a key, T2 wrote the next one (an anti-dependency)

and search it for cycles (Adya's phenomena): G0 (only ww edges: a write cycle), G1c (ww and wr
edges, at least one wr: cyclic information flow), and G-single / G2 (cycles that need an rw
edge). Kafka does not promise serializable transactions: its transactions make writes atomic and
hide aborted ones from read_committed readers, but two transactions' writes may interleave
differently in two partitions (G0) and a transaction may read what another committed after its
own earlier write (G1c). The checker reports the cycles; whether they count against a broker is
the caller's choice (`checker.KAFKA_GUARANTEES` leaves them out).
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable
from dataclasses import dataclass

Edge = tuple[int, int, str]  # (from txn, to txn, "ww" | "wr" | "rw")


@dataclass(slots=True, frozen=True)
class Cycle:
    kind: str  # "G0", "G1c", "G2"
    steps: tuple[Edge, ...]

    def path(self) -> str:
        return "".join(f"op {a} -{k}-> " for a, _b, k in self.steps) + f"op {self.steps[-1][1]}"

    def __str__(self) -> str:
        return f"{self.kind}: {self.path()}"


def edges(
    orders: dict[int, list[str]],
    writer: dict[str, int],
    reads: dict[int, dict[int, list[str]]],
) -> set[Edge]:
    """Edges from each key's version order (values by offset), the txn that wrote each value,
    and each txn's reads {txn: {key: values read}}."""
    out: set[Edge] = set()
    for _key, versions in orders.items():
        for a, b in zip(versions, versions[1:], strict=False):
            wa, wb = writer.get(a), writer.get(b)
            if wa is not None and wb is not None and wa != wb:
                out.add((wa, wb, "ww"))
    for txn, per_key in reads.items():
        for key, values in per_key.items():
            versions = orders.get(key, [])
            position = {v: i for i, v in enumerate(versions)}
            last = -1
            for v in values:
                w = writer.get(v)
                if w is not None and w != txn:
                    out.add((w, txn, "wr"))
                last = max(last, position.get(v, -1))
            # the first later version written by another txn is what this read missed (a
            # poll ending inside one transaction's writes misses nothing: a poll is bounded)
            seen_writer = writer.get(versions[last]) if last >= 0 else None
            for later in versions[last + 1 :] if last >= 0 else []:
                w = writer.get(later)
                if w is not None and w not in (txn, seen_writer):
                    out.add((txn, w, "rw"))
                    break
                if w != seen_writer:
                    break
    return out


def cycles(all_edges: Iterable[Edge], limit: int = 10) -> list[Cycle]:
    """At most `limit` cycles of each kind, G0 first, then G1c, then G2."""
    es = set(all_edges)
    found: list[Cycle] = []
    found += _search(es, {"ww"}, "G0", lambda steps: True, limit)
    found += _search(es, {"ww", "wr"}, "G1c", lambda s: any(k == "wr" for *_x, k in s), limit)
    found += _search(es, {"ww", "wr", "rw"}, "G2", lambda s: any(k == "rw" for *_x, k in s), limit)
    return found


def _search(es: set[Edge], kinds: set[str], name: str, want: object, limit: int) -> list[Cycle]:
    """For each edge of the wanted kind inside a strongly connected component, the shortest
    path back closes a cycle; keep those whose steps `want` accepts."""
    graph: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for a, b, k in sorted(es):
        if k in kinds:
            graph[a].append((b, k))
    comp = _components(graph)
    out: list[Cycle] = []
    seen: set[frozenset[Edge]] = set()
    for a, b, k in sorted(es):
        if k not in kinds or comp.get(a) is None or comp.get(a) != comp.get(b):
            continue
        back = _path(graph, b, a, comp)
        if back is None:
            continue
        steps = ((a, b, k), *back)
        if not callable(want) or not want(steps):
            continue
        key = frozenset(steps)
        if key in seen:
            continue
        seen.add(key)
        out.append(Cycle(name, steps))
        if len(out) >= limit:
            break
    return out


def _path(
    graph: dict[int, list[tuple[int, str]]], src: int, dst: int, comp: dict[int, int]
) -> tuple[Edge, ...] | None:
    if src == dst:
        return ()
    prev: dict[int, tuple[int, str]] = {}
    queue = deque([src])
    while queue:
        node = queue.popleft()
        for nxt, k in graph.get(node, []):
            if nxt in prev or nxt == src or comp.get(nxt) != comp.get(src):
                continue
            prev[nxt] = (node, k)
            if nxt == dst:
                steps: list[Edge] = []
                cur = dst
                while cur != src:
                    p, kk = prev[cur]
                    steps.append((p, cur, kk))
                    cur = p
                return tuple(reversed(steps))
            queue.append(nxt)
    return None


def _components(graph: dict[int, list[tuple[int, str]]]) -> dict[int, int]:
    """Tarjan's strongly connected components (iterative); nodes in a component of one node
    without a self loop are left out."""
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    on: set[int] = set()
    stack: list[int] = []
    out: dict[int, int] = {}
    counter = 0
    nodes = set(graph) | {b for targets in graph.values() for b, _k in targets}
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on.add(node)
            targets = graph.get(node, [])
            if i < len(targets):
                work.append((node, i + 1))
                nxt = targets[i][0]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on:
                    low[node] = min(low[node], index[nxt])
                continue
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                members = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    members.append(w)
                    if w == node:
                        break
                if len(members) > 1:
                    for w in members:
                        out[w] = node
    return out
