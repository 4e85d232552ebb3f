"""`python -m odradek` runs the CLI."""

from odradek.cli import main

raise SystemExit(main())
