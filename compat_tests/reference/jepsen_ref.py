"""The queue workload (odradek.testing.jepsen) against three Apache Kafka 4.4 KRaft combined nodes,
each on its own host (network namespaces, compat_tests/reference/kafka_hosts.py), under the same
nemesis and seeds as odradek's soak: a check of the checker. `python -m bench.jepsen --broker
kafka` with the same options (--seeds, --start, --seed, --kinds, --java, --minutes, --keep-logs,
--work-dir, -v, ...):

    sudo python -m compat_tests.reference.jepsen_ref --seeds 100 --java 0.5
    python -m compat_tests.reference.jepsen_ref --seed 17 -v --keep-logs /tmp/k

Kinds that need odradek (power-loss, eio, clock-jump) are left out with the reason printed;
zk-cut runs as its KRaft analogue (the controller listener cut, kafka_hosts.py). Prints each
seed's verdict and the soak table of `bench.jepsen`; exit status 0 when every seed is valid
(nothing Kafka documents as guaranteed was broken).
"""

from __future__ import annotations

import sys

from bench.jepsen import main as soak


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    return soak(["--broker", "kafka", *args])


if __name__ == "__main__":
    sys.exit(main())
