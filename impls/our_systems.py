"""The systems of this repository, found where each is registered: a class under ``impls/`` decorated with
``@register`` whose ``name`` is a string. That decorator is the one place a system of ours is registered; this module
reads it from the source (no module is imported, so a system whose optional dependency is missing is still known by
name) and gives the registry its name -> module table."""
from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

IMPLS = Path(__file__).resolve().parent


def modules(impls: Path = IMPLS) -> dict[str, str]:
    """Registry name -> dotted module of every ``@register`` class under ``impls`` (the ``impls`` package folder);
    ValueError when two classes claim one name or a registered class has no string ``name``."""
    files = sorted(impls.rglob("*.py"))
    return dict(_scan(impls, tuple((f, f.stat().st_mtime_ns) for f in files)))


@lru_cache(maxsize=4)
def _scan(impls: Path, files: tuple[tuple[Path, int], ...]) -> tuple[tuple[str, str], ...]:
    table: dict[str, str] = {}
    for path, _ in files:
        text = path.read_text()
        if "@register" not in text:
            continue
        parts = path.relative_to(impls.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for node in ast.parse(text, str(path)).body:
            if isinstance(node, ast.ClassDef) and any(_is_register(d) for d in node.decorator_list):
                name = _class_name(node)
                if name is None:
                    raise ValueError(f"{path}: @register class {node.name} has no string `name` attribute")
                if name in table and table[name] != module:
                    raise ValueError(f"system name {name!r} registered twice: {table[name]} and {module}")
                table[name] = module
    return tuple(sorted(table.items()))


def _is_register(decorator: ast.expr) -> bool:
    return (isinstance(decorator, ast.Name) and decorator.id == "register") or (
        isinstance(decorator, ast.Attribute) and decorator.attr == "register")


def _class_name(node: ast.ClassDef) -> str | None:
    for stmt in node.body:
        target = stmt.target if isinstance(stmt, ast.AnnAssign) else (
            stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else None)
        if isinstance(target, ast.Name) and target.id == "name" and isinstance(stmt.value, ast.Constant) \
                and isinstance(stmt.value.value, str):
            return stmt.value.value
    return None
