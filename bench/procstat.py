"""CPU time and memory of a process, read from Linux's /proc (proc(5)).

CPU seconds are utime + stime from /proc/PID/stat (fields 14 and 15, in clock ticks), and the
whole host's busy time comes from /proc/stat, so that a phase can tell how much CPU other
processes took while it ran (benchmarks on a shared machine are noisy). Memory is
VmRSS (resident now) and VmHWM (peak resident, the "high water mark") from /proc/PID/status.
Writing "5" to /proc/PID/clear_refs resets VmHWM to the current RSS (Linux >= 4.0), which lets a
phase report its own peak instead of the process's lifetime peak.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from time import perf_counter

_CLK_TCK = os.sysconf("SC_CLK_TCK")
# Fields of /proc/PID/stat counted after the ")" that closes the command name, which may itself
# contain spaces: field 3 (state) is index 0 there, so utime (14) is 11 and stime (15) is 12.
_UTIME_AFTER_COMM = 11
_STIME_AFTER_COMM = 12


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds used so far by the process `pid` (all its threads)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2 :].split()
    ticks = int(fields[_UTIME_AFTER_COMM]) + int(fields[_STIME_AFTER_COMM])
    return ticks / _CLK_TCK


def memory_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of the process `pid` in MB (10**6 bytes)."""
    rss = hwm = 0.0
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024 / 1e6
            elif line.startswith("VmHWM:"):
                hwm = int(line.split()[1]) * 1024 / 1e6
    return rss, hwm


def reset_peak_rss(pid: int) -> bool:
    """Reset VmHWM of `pid` to its current RSS; False when the kernel or permissions refuse."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
    except OSError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class Usage:
    """What a process used during one phase: CPU seconds, wall seconds and memory in MB."""

    cpu_s: float
    wall_s: float
    rss_mb: float
    peak_rss_mb: float
    peak_is_per_phase: bool


class ProcessMeter:
    """Measures one process over a phase: `begin()`, run the phase, `end()` gives its Usage."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._cpu0 = 0.0
        self._wall0 = 0.0
        self._per_phase = False

    def begin(self) -> None:
        self._per_phase = reset_peak_rss(self.pid)
        self._cpu0 = cpu_seconds(self.pid)
        self._wall0 = perf_counter()

    def end(self) -> Usage:
        cpu = cpu_seconds(self.pid) - self._cpu0
        wall = perf_counter() - self._wall0
        rss, hwm = memory_mb(self.pid)
        return Usage(cpu, wall, rss, hwm, self._per_phase)


def host_busy_seconds() -> float:
    """CPU seconds all CPUs of this host have spent busy since boot (/proc/stat "cpu" line:
    user nice system idle iowait irq softirq steal ...; busy is all but idle and iowait)."""
    with open("/proc/stat", encoding="ascii") as f:
        fields = f.readline().split()
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[1:9])
    return (user + nice + system + irq + softirq + steal) / _CLK_TCK


class SelfMeter:
    """CPU seconds of this (client) process, librdkafka's threads included, plus the children it
    waited for meanwhile (the native driver, bench.native), and of the host."""

    def __init__(self) -> None:
        self._cpu0 = 0.0
        self._host0 = 0.0

    def begin(self) -> None:
        self._cpu0 = _self_cpu()
        self._host0 = host_busy_seconds()

    def end(self) -> tuple[float, float]:
        """(this process's CPU seconds, the host's busy CPU seconds) since begin()."""
        return _self_cpu() - self._cpu0, host_busy_seconds() - self._host0


def _self_cpu() -> float:
    times = os.times()  # children: only those reaped (waited for), so not a running broker
    return times.user + times.system + times.children_user + times.children_system
