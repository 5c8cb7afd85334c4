"""The layers hold: app/ never imports torch, transformers or the worker, and the imports
of app/, worker/ and bench/ form no cycle, between modules or between packages."""

import ast
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "app"
HEAVY = ("torch", "transformers", "worker")
FIRST_PARTY = ("app", "worker", "bench")


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


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(module: str, path: Path) -> Iterator[str]:
    """Every name an import statement of the module names, with ``from x import y`` as
    ``x.y`` (a module or a name in ``x``) and ``x``; relative imports made absolute."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def import_graph() -> dict[str, set[str]]:
    """Each first-party module and the first-party modules it imports."""
    paths = {
        module_name(path): path
        for package in FIRST_PARTY
        for path in (ROOT / package).rglob("*.py")
    }
    graph = {}
    for module, path in paths.items():
        targets = set()
        for name in imported_names(module, path):
            while name and name not in paths:
                name = name.rpartition(".")[0]
            if name and name != module:
                targets.add(name)
        graph[module] = targets
    return graph


def package_of(module: str) -> str:
    """The package under app/, worker/ or bench/ that holds the module, or the module itself
    where it sits at the top (app.admin.agreement.views: app.admin; app.cli: app.cli)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if (ROOT / Path(*parts[:2])).is_dir() else module


def a_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One cycle of the graph, as the nodes along it back to the first; [] when there is none."""
    done: set[str] = set()
    for start in sorted(graph):
        if start in done:
            continue
        path, branches = [start], [iter(sorted(graph[start]))]
        while branches:
            target = next(branches[-1], None)
            if target is None:
                done.add(path.pop())
                branches.pop()
            elif target in path:
                return [*path[path.index(target) :], target]
            elif target not in done:
                path.append(target)
                branches.append(iter(sorted(graph[target])))
    return []


def test_a_cycle_finds_one() -> None:
    assert a_cycle({"a": {"b"}, "b": {"c"}, "c": {"b"}}) == ["b", "c", "b"]
    assert a_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []


def test_modules_import_no_cycle() -> None:
    """Every import counts: at module level, inside functions (the command line's lazy
    imports) and under TYPE_CHECKING. A lazy import is a dependency all the same, and moving
    an import into a function is no way around a cycle: move the shared code down a layer."""
    assert a_cycle(import_graph()) == []


def test_packages_import_no_cycle() -> None:
    """The same imports between packages (app.datasets, app.labeling, app.quality, ...): two
    packages never import each other, even through modules that do not."""
    packages: dict[str, set[str]] = {}
    for module, targets in import_graph().items():
        package = package_of(module)
        packages.setdefault(package, set()).update(package_of(target) for target in targets)
        packages[package].discard(package)
    assert a_cycle(packages) == []


def test_every_path_the_readme_map_names_exists() -> None:
    """The README's map of the code (its "Layout") names files and folders that are there."""
    readme = (ROOT / "README.md").read_text()
    layout = readme.split("## Layout\n", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"\b(?:app|worker|bench|tests|migrations)/[\w/.]*\w", layout))
    # The worker's modules are listed by name alone, beneath "worker/".
    worker = layout.split("\nworker/", 1)[1].split("\nmigrations/", 1)[0]
    named |= {f"worker/{name}" for name in re.findall(r"\b\w+\.py\b", worker)}
    assert len(named) > 50
    assert sorted(path for path in named if not (ROOT / path).exists()) == []
