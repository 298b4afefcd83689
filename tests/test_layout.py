"""Where code lives: test and bench support never ships with the packages, the shared builders
import as the `tests.support` package from the repository root, no test edits sys.path, and
imports between the shipped packages follow the arrows of docs/design.md ("Layout")."""

import ast
import importlib.util
import os
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def shipped_packages() -> list[str]:
    """The top-level packages pyproject.toml installs (its `find.include` patterns)."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["packages"]["find"]["include"]
    return sorted({p.rstrip("*").rstrip(".") for p in patterns})


def imported_roots(tree: ast.AST) -> set[str]:
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def is_sys_path(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "path"
        and isinstance(node.value, ast.Name)
        and node.value.id == "sys"
    )


def edits_sys_path(tree: ast.AST) -> bool:
    """A call of sys.path.insert/append/extend, or an assignment to sys.path or a slice of it."""
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("insert", "append", "extend")
            and is_sys_path(node.func.value)
        ):
            return True
        if isinstance(node, ast.Assign):
            for target in node.targets:
                inner = target.value if isinstance(target, ast.Subscript) else target
                if is_sys_path(inner):
                    return True
    return False


# The arrows of docs/design.md: what each shipped package may import of the others. flows knows
# the order of things; engine, loadgen, collectors and injectors never import each other, only
# spikelens_common, which imports nothing of spikelens.
ALLOWED_IMPORTS: dict[str, set[str]] = {
    "spikelens_common": set(),
    "engine": {"spikelens_common"},
    "loadgen": {"spikelens_common"},
    "collectors": {"spikelens_common"},
    "injectors": {"spikelens_common"},
    "warehouse": {"spikelens_common"},
    "rca": {"warehouse", "spikelens_common"},
    "pages": {"warehouse", "rca", "spikelens_common"},
    "templates": {"pages", "spikelens_common"},
    "scenarios": set(),
    "flows": {
        "engine",
        "loadgen",
        "collectors",
        "injectors",
        "warehouse",
        "rca",
        "pages",
        "templates",
        "scenarios",
        "spikelens_common",
    },
}


def arrow_violations(root: Path, allowed: dict[str, set[str]]) -> list[str]:
    """`file: package -> package` for every import (at any depth: in functions and under
    TYPE_CHECKING too) from one package of `allowed` to another that its entry does not list."""
    found = []
    for package, may in sorted(allowed.items()):
        for path in sorted((root / package).rglob("*.py")):
            roots = imported_roots(ast.parse(path.read_text()))
            for other in sorted((roots & set(allowed)) - may - {package}):
                found.append(f"{path.relative_to(root)}: {package} -> {other}")
    return found


def test_every_shipped_package_has_its_arrows():
    assert set(ALLOWED_IMPORTS) == set(shipped_packages())


def test_imports_follow_the_arrows_of_the_design():
    assert arrow_violations(REPO, ALLOWED_IMPORTS) == []


def test_the_arrow_check_fails_on_a_sideways_or_upward_import(tmp_path):
    for package in ("engine", "loadgen", "spikelens_common"):
        (tmp_path / package).mkdir()
    (tmp_path / "engine" / "ok.py").write_text("from spikelens_common import x\n")
    (tmp_path / "loadgen" / "side.py").write_text(
        "def f():\n    from engine.config import EngineConfig\n"
    )
    (tmp_path / "spikelens_common" / "up.py").write_text("import loadgen.spec\n")
    allowed = {key: ALLOWED_IMPORTS[key] for key in ("engine", "loadgen", "spikelens_common")}
    assert arrow_violations(tmp_path, allowed) == [
        "loadgen/side.py: loadgen -> engine",
        "spikelens_common/up.py: spikelens_common -> loadgen",
    ]


def test_no_shipped_module_imports_the_tests():
    packages = shipped_packages()
    assert {"engine", "loadgen", "spikelens_common"} <= set(packages)
    offenders = [
        str(path.relative_to(REPO))
        for package in packages
        for path in sorted((REPO / package).rglob("*.py"))
        if "tests" in imported_roots(ast.parse(path.read_text()))
    ]
    assert offenders == []


def test_the_calibration_server_is_test_support_not_loadgen():
    assert importlib.util.find_spec("loadgen.sse_server") is None
    assert importlib.util.find_spec("loadgen.metrics_scraper") is None
    assert importlib.util.find_spec("tests.support.sse_server") is not None


def test_tests_import_as_a_package_from_the_repository_root():
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    code = "import tests.support.runbuilder as m; print(m.__name__, m.__file__)"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True
    )
    name, path = out.stdout.split()
    assert name == "tests.support.runbuilder"
    assert Path(path) == REPO / "tests" / "support" / "runbuilder.py"


def test_no_test_module_edits_sys_path():
    offenders = [
        str(path.relative_to(REPO))
        for path in sorted((REPO / "tests").rglob("*.py"))
        if edits_sys_path(ast.parse(path.read_text()))
    ]
    assert offenders == []
