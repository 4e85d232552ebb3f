"""`python -m bench.native`: build the native driver if needed and print its path."""

import sys

from bench.native import NativeUnavailable, ensure_built

try:
    print(ensure_built())
except NativeUnavailable as exc:
    print(f"bench.native: {exc}", file=sys.stderr)
    raise SystemExit(1) from None
