"""The web app stays light: app/ never imports torch, transformers or the worker."""

import ast
import subprocess
import sys
from pathlib import Path

APP = Path(__file__).resolve().parents[1] / "app"
HEAVY = ("torch", "transformers", "worker")


def test_no_app_module_imports_the_worker_or_torch() -> None:
    offenders = []
    for path in APP.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] in HEAVY]
    assert offenders == []


def test_loading_the_web_app_loads_no_torch() -> None:
    code = (
        "import sys, app.main, app.cli; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=APP.parent
    )
    assert result.stdout.strip() == "[]"
