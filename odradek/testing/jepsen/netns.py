"""Hosts in Linux network namespaces: each with its own address on a private bridge, so that
faults are real network faults (Jepsen's separate machines, on one machine).

    with Network(["z0", "b0", "client"]) as net:     # needs root and iproute2
        net.spawn("b0", ["python", "-m", "odradek", "serve", ...])
        net.isolate({"b0"}, {"z0", "client"})        # a partition both ways
        net.netem("b0", "delay 50ms 20ms loss 5%")   # tc netem on the host's interface
        net.heal()

Layout: a bridge `jb<tag>` in the root namespace with 10.A.B.1/24 (the control address the
runner uses to check readiness); per host a namespace `jp<tag>-<host>` and a veth pair whose
inner end is `eth0` with 10.A.B.(10 + i)/24. A partition puts blackhole routes into both sides'
namespaces (packets to the other side are dropped; TCP connections stall as over a cut link);
a cut of one TCP port (`isolate_port`) does the same through a policy rule for that port;
netem is a root qdisc on the host's eth0. `close()` kills what it spawned and deletes every
namespace and interface it made, also when set-up failed half way; `sweep()` removes what a
killed runner left behind (names carry the runner's pid).
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import signal
import subprocess
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

T = TypeVar("T")
CLONE_NEWNET = 0x40000000
_NAME = re.compile(r"^jp(\d+)x\d+-")


class NetnsUnavailable(RuntimeError):
    """What this machine lacks to run hosts in network namespaces (root, iproute2, netem)."""


def _run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(args, capture_output=True, text=True, timeout=30)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {proc.stderr.strip() or proc.returncode}")
    return proc


def missing() -> list[str]:
    """What is missing here to make namespaces, veth pairs, a bridge and netem; [] if nothing."""
    out = []
    if os.geteuid() != 0:
        out.append("root (CAP_NET_ADMIN and CAP_SYS_ADMIN to make network namespaces)")
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            out.append(f"the '{tool}' command (Debian package iproute2)")
    return out


_counter = 0
_lock = threading.Lock()


class Network:
    def __init__(self, hosts: Sequence[str]) -> None:
        global _counter
        lack = missing()
        if lack:
            raise NetnsUnavailable("network namespaces need " + ", ".join(lack))
        with _lock:
            _counter += 1
            n = _counter
        pid = os.getpid()
        self.tag = f"{pid}x{n}"
        self.bridge = f"jb{pid % 100000}x{n}"[:15]
        a, b = 200 + (pid + n) % 50, (pid // 50 + n) % 250
        self.subnet = f"10.{a}.{b}"
        self.control = f"{self.subnet}.1"
        self.hosts = list(hosts)
        self.addresses = {h: f"{self.subnet}.{10 + i}" for i, h in enumerate(self.hosts)}
        self.procs: dict[str, list[subprocess.Popen[bytes]]] = {h: [] for h in self.hosts}
        self.cuts: set[tuple[str, str]] = set()
        self.port_cuts: set[tuple[str, str, int]] = set()  # (from, to, TCP port)
        self.port_rules: set[tuple[str, int]] = set()  # (host, port): its policy rule
        self.shaped: set[str] = set()
        self._made_ns: list[str] = []
        self._made_links: list[str] = []
        try:
            self._build()
        except BaseException:
            self.close()
            raise

    def ns(self, host: str) -> str:
        return f"jp{self.tag}-{host}"

    def _build(self) -> None:
        _run("ip", "link", "add", self.bridge, "type", "bridge")
        self._made_links.append(self.bridge)
        _run("ip", "addr", "add", f"{self.control}/24", "dev", self.bridge)
        _run("ip", "link", "set", self.bridge, "up")
        for i, host in enumerate(self.hosts):
            ns, outer = self.ns(host), f"jv{self.tag}h{i}"
            if len(outer) > 15:
                outer = f"jv{abs(hash(self.tag)) % 10**6}h{i}"
            _run("ip", "netns", "add", ns)
            self._made_ns.append(ns)
            _run("ip", "link", "add", outer, "type", "veth", "peer", "name", "eth0", "netns", ns)
            self._made_links.append(outer)
            _run("ip", "link", "set", outer, "master", self.bridge, "up")
            _run("ip", "-n", ns, "addr", "add", f"{self.addresses[host]}/24", "dev", "eth0")
            _run("ip", "-n", ns, "link", "set", "eth0", "up")
            _run("ip", "-n", ns, "link", "set", "lo", "up")

    # -- processes ------------------------------------------------------------------------------

    def spawn(
        self,
        host: str,
        argv: Sequence[str],
        log_path: str,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start `argv` in `host`'s namespace (`ip netns exec` execs it: the pid is argv's)."""
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                ["ip", "netns", "exec", self.ns(host), *argv],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=cwd,
            )
        self.procs[host].append(proc)
        return proc

    def signal(self, proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
        if proc.poll() is None:
            os.kill(proc.pid, sig)

    def run_inside(self, host: str, fn: Callable[[], T]) -> T:
        """Call `fn` in a thread that entered `host`'s namespace (threads it starts, and
        librdkafka's, inherit it), and return its result."""
        result: list[T] = []
        error: list[BaseException] = []

        def body() -> None:
            try:
                fd = os.open(f"/run/netns/{self.ns(host)}", os.O_RDONLY)
                try:
                    libc = ctypes.CDLL(None, use_errno=True)
                    if libc.setns(fd, CLONE_NEWNET) != 0:
                        raise OSError(ctypes.get_errno(), "setns")
                finally:
                    os.close(fd)
                result.append(fn())
            except BaseException as exc:
                error.append(exc)

        t = threading.Thread(target=body, name=f"netns-{host}", daemon=True)
        t.start()
        t.join()
        if error:
            raise error[0]
        return result[0]

    # -- faults ---------------------------------------------------------------------------------

    def isolate(self, side: Iterable[str], other: Iterable[str]) -> None:
        """Drop every packet between the two sides, both ways."""
        for a in side:
            for b in other:
                if a != b:
                    self._cut(a, b)
                    self._cut(b, a)

    def _cut(self, a: str, b: str) -> None:
        if (a, b) not in self.cuts:
            _run("ip", "-n", self.ns(a), "route", "add", "blackhole", f"{self.addresses[b]}/32")
            self.cuts.add((a, b))

    def isolate_port(self, side: Iterable[str], other: Iterable[str], port: int) -> None:
        """Drop TCP packets to `port` between the two sides, both ways (each side's connections
        to the other's listener on `port` stall; other traffic flows): a policy rule sends a
        host's packets to that port through a routing table of its own (table number = port)
        with blackhole routes to the hosts cut off."""
        for a in side:
            for b in other:
                if a != b:
                    self._cut_port(a, b, port)
                    self._cut_port(b, a, port)

    def _cut_port(self, a: str, b: str, port: int) -> None:
        if (a, port) not in self.port_rules:
            rule = ("rule", "add", "ipproto", "tcp", "dport", str(port), "table", str(port))
            _run("ip", "-n", self.ns(a), *rule, "priority", "100")
            self.port_rules.add((a, port))
        if (a, b, port) not in self.port_cuts:
            route = ("route", "add", "blackhole", f"{self.addresses[b]}/32", "table", str(port))
            _run("ip", "-n", self.ns(a), *route)
            self.port_cuts.add((a, b, port))

    def netem(self, host: str, spec: str) -> str:
        """`tc qdisc replace dev eth0 root netem <spec>` in `host`'s namespace. A kernel without
        sch_netem (no module to load in some VMs) gets a token bucket instead (`tbf`: a slow
        link, whose queue delays and overflows drop): the qdisc used is returned."""
        self.shaped.add(host)
        base = ("ip", "netns", "exec", self.ns(host), "tc", "qdisc", "replace", "dev", "eth0")
        if _run(*base, "root", "netem", *spec.split(), check=False).returncode == 0:
            return f"netem {spec}"
        _run(*base, "root", "tbf", "rate", "2mbit", "burst", "8kb", "latency", "150ms")
        return "tbf rate 2mbit latency 150ms (no sch_netem in this kernel)"

    def heal(self) -> None:
        for a, b in sorted(self.cuts):
            _run(
                "ip",
                "-n",
                self.ns(a),
                "route",
                "del",
                "blackhole",
                f"{self.addresses[b]}/32",
                check=False,
            )
        self.cuts.clear()
        for a, b, port in sorted(self.port_cuts):
            route = ("route", "del", "blackhole", f"{self.addresses[b]}/32", "table", str(port))
            _run("ip", "-n", self.ns(a), *route, check=False)
        self.port_cuts.clear()
        for a, port in sorted(self.port_rules):
            rule = ("rule", "del", "ipproto", "tcp", "dport", str(port), "table", str(port))
            _run("ip", "-n", self.ns(a), *rule, "priority", "100", check=False)
        self.port_rules.clear()
        for host in sorted(self.shaped):
            _run(
                "ip",
                "netns",
                "exec",
                self.ns(host),
                "tc",
                "qdisc",
                "del",
                "dev",
                "eth0",
                "root",
                check=False,
            )
        self.shaped.clear()

    # -- teardown -------------------------------------------------------------------------------

    def close(self) -> None:
        for procs in self.procs.values():
            for proc in procs:
                if proc.poll() is None:
                    try:
                        os.kill(proc.pid, signal.SIGCONT)
                        proc.kill()
                    except ProcessLookupError:
                        pass
                    proc.wait(10)
        for ns in reversed(self._made_ns):
            _run("ip", "netns", "del", ns, check=False)
        self._made_ns.clear()
        for link in reversed(self._made_links):
            if _run("ip", "link", "show", link, check=False).returncode == 0:
                _run("ip", "link", "del", link, check=False)
        self._made_links.clear()

    def __enter__(self) -> Network:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def sweep() -> list[str]:
    """Delete namespaces and bridges left by runners that no longer live; the names removed."""
    removed = []
    names = _run("ip", "netns", "list", check=False).stdout.split("\n")
    for line in names:
        name = line.split(" ")[0]
        m = _NAME.match(name)
        if m and not _alive(int(m.group(1))):
            _run("ip", "netns", "del", name, check=False)
            removed.append(name)
    for line in _run("ip", "-o", "link", "show", "type", "bridge", check=False).stdout.split("\n"):
        m = re.match(r"^\d+: (jb(\d+)x\d+)[:@]", line)
        if m and not _alive(int(m.group(2))):
            _run("ip", "link", "del", m.group(1), check=False)
            removed.append(m.group(1))
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
