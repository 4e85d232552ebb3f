"""A seeded chaos runner over an in-process cluster, with a checker of Kafka's guarantees
(Jepsen's method with odradek's fault hooks).

    from odradek.testing.chaos import run_seed
    result = run_seed(7)              # one cluster, one seed's fault schedule, one verdict
    assert result.valid, result.explain()

Modules: `schedule` (faults from a seed), `history` (what clients did and saw), `clients` (the
client threads), `runner` (the nemesis and one seed's phases), `checker` (the guarantees).
`python -m bench.chaos --seeds 1000` runs the long soak.
"""

from odradek.testing.chaos.checker import Anomaly, Report, check
from odradek.testing.chaos.history import History, Op
from odradek.testing.chaos.runner import Options, Result, run_seed, supported_kinds
from odradek.testing.chaos.schedule import Fault, Schedule, generate

__all__ = [
    "Anomaly",
    "Fault",
    "History",
    "Op",
    "Options",
    "Report",
    "Result",
    "Schedule",
    "check",
    "generate",
    "run_seed",
    "supported_kinds",
]
