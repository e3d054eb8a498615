"""The import graph of the project's four packages, read from the code with `ast` (nothing is imported).

Every `import` statement counts, at module level or inside a function: a lazy import still ties two files
together. `from pkg import name` points at `pkg/name.py` when that is a module, else at `pkg/__init__.py`.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("interp", "sae", "circuits", "attribution")
FAMILIES = ("sae", "circuits", "attribution")


def module_files(root: Path = ROOT) -> dict[str, Path]:
    """Dotted module name -> file, for every `.py` under the packages."""
    out = {}
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def _resolve(current: str, is_package: bool, level: int, module: str | None) -> str:
    if level == 0:
        return module or ""
    base = current.split(".") if is_package else current.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules that `name` (at `path`) imports."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(name, is_package, node.level, node.module)
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:  # `import a.b.c` where c is a name: fall back to its module
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    modules = module_files(root)
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in graph:
                    continue
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return sorted(out)


def family_imports_in_core(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(core module, family module) for every import of a method family from `interp`."""
    return sorted(
        (src, dst)
        for src, targets in graph.items()
        if src.split(".")[0] == "interp"
        for dst in targets
        if dst.split(".")[0] in FAMILIES
    )


def cross_family_imports(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(family module, other family's module): the families meet only through `interp`."""
    return sorted(
        (src, dst)
        for src, targets in graph.items()
        if src.split(".")[0] in FAMILIES
        for dst in targets
        if dst.split(".")[0] in FAMILIES and dst.split(".")[0] != src.split(".")[0]
    )


if __name__ == "__main__":
    g = import_graph()
    for c in cycles(g):
        print(" <-> ".join(c))
    print("core->family", family_imports_in_core(g))
    print("cross-family", cross_family_imports(g))
