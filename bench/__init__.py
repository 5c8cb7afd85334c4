"""Benches: scripts that print figures for BENCHMARKS.md (``python -m bench.<name>``)."""

from pathlib import Path

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
"""The public data beside the project (../shared/data); every bench's ``--data`` default.
Kept here, not in a bench module, so that a bench can name it without importing torch."""
