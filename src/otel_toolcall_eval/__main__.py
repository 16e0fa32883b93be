"""``python -m otel_toolcall_eval``: the command line, as the ``otel-toolcall-eval`` script runs it."""

from __future__ import annotations

import sys

from otel_toolcall_eval.cli import main

if __name__ == "__main__":
    sys.exit(main())
