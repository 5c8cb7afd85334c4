"""Benches: scripts that print figures for BENCHMARKS.md (``python -m bench.<name>``)."""

from pathlib import Path

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
"""The public data beside the project (../shared/data): every bench's ``--data`` default and
the tests' ``shared_data``. Kept here, not in a bench module, so that it is named without
importing torch."""
