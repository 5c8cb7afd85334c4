#!/usr/bin/env bash
# `make run`: the web app and the PRM worker side by side on SQLite; Ctrl-C stops both.
# The demo trains the tiny PRM after a handful of labels instead of waiting for 50, and
# serves its quality-control questions early (one task in five while any are left).
set -euo pipefail
bin=.venv/bin
export STEPLABEL_TRAIN_MIN_NEW_LABELS="${STEPLABEL_TRAIN_MIN_NEW_LABELS:-8}"
export STEPLABEL_QC_RATE="${STEPLABEL_QC_RATE:-0.2}"
export STEPLABEL_WORKER_POLL_SECONDS="${STEPLABEL_WORKER_POLL_SECONDS:-10}"

"$bin/python" -m worker &
worker=$!
trap 'kill "$worker" 2>/dev/null || true; wait "$worker" 2>/dev/null || true' EXIT INT TERM
"$bin/uvicorn" app.main:app --host "${HOST:-127.0.0.1}" --port "${PORT:-8000}"
