"""`python -m bench` runs the benchmark (see bench.runner)."""

from bench.runner import main

raise SystemExit(main())
