"""No two modules of the service import each other, directly or around a longer circle: a circle
hides which of them is the lower one, and one of its imports has to hide inside a function to
load at all. Every import counts, those inside functions too (they close the circle at run time);
only those under ``if TYPE_CHECKING:`` do not, as nothing runs them.

Import-linter's contracts keep the layers apart, but not the modules inside one layer: this walk
covers every module of ``service/``, so a circle anywhere fails here."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.paths import REPO_ROOT as ROOT

SERVICE = ROOT / "service"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import in ``tree`` but those under ``if TYPE_CHECKING:``."""
    found: list[ast.Import | ast.ImportFrom] = []
    pending: list[ast.AST] = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            pending.extend(node.orelse)
            continue
        pending.extend(ast.iter_child_nodes(node))
    return found


def import_graph() -> dict[str, set[str]]:
    """Each module of the service, and the modules of the service it imports. ``from package
    import name`` is an import of the submodule when ``name`` is one, else of the package; a
    package's ``__init__`` is not counted for importing one of its submodules (else every package
    that re-exports its modules would be a circle)."""
    paths = {_module_name(path): path for path in SERVICE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in _imports(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
                continue
            base = node.module or ""
            if node.level:  # relative: from the module's package, up level - 1
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                targets.add(submodule if submodule in paths else base)
        graph[name] = {target for target in targets if target in paths and target != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The graph's strongly connected components of more than one module (Tarjan's), each
    sorted: every circle of imports lies within one."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_modules_of_the_service_import_each_other() -> None:
    graph = import_graph()
    assert len(graph) > 50, "the walk found the service's modules"
    assert cycles(graph) == []


def test_the_check_finds_a_circle_and_skips_type_checking_imports() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    import service.app\n"
        "def later():\n    import service.server\n"
    )
    names = [alias.name for node in _imports(tree) for alias in node.names]
    assert sorted(names) == ["TYPE_CHECKING", "service.server"]
