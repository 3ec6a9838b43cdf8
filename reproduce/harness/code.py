"""Hashing code by what it does, and the static import graph. Each file is hashed on what it does, not how it reads:
Python as its syntax tree without docstrings (comments are not in the tree), C++ / CUDA without comments and with
whitespace collapsed, so a docstring or comment edit changes no hash. ``closure`` follows imports read from the source
(every import at module level or inside a function, package ``__init__`` files, systems built by name): the layering
test reads the graph, and fingerprint.py, the one fingerprint mechanism, uses it for what is not a run (`dlrmbench
bench`, the scale model's fit, a `data synth` generator: what their code imports; a run: the code it executed).
Pure file reading: no module is imported (torch neither); what is derived from a file's text is kept between
processes by derived_cache.py, keyed by that text."""
from __future__ import annotations

import ast
import hashlib
import re
from functools import lru_cache
from pathlib import Path

from reproduce.harness.derived_cache import derived

ROOT = Path(__file__).resolve().parents[2]
RULE = Path(__file__)  # what derives the values this module caches (derived_cache.py)
PACKAGES = ("impls", "reproduce", "benchmarks")


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, root: Path = ROOT) -> set[str]:
    """Every module ``path`` imports (``from a.b import c`` counts as a.b and as a.b.c when that is a module;
    relative imports resolved against the file's package)."""
    text = path.read_text()
    return set(derived("imports", RULE, source_key(path, text, root), lambda: sorted(_imports_in(path, text, root))))


def _imports_in(path: Path, text: str, root: Path) -> set[str]:
    out: set[str] = set()
    here = module_name(path, root).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod:
                out.add(mod)
                out |= {f"{mod}.{a.name}" for a in node.names}
    return out


def _built_by_name(tree: ast.Module) -> list[ast.AST]:
    """What a module passes to ``get_impl``: the calls' arguments and the module-level values they refer to
    (a table of storages by name)."""
    args: list[ast.AST] = [a for n in ast.walk(tree) if isinstance(n, ast.Call)
                           and getattr(n.func, "id", getattr(n.func, "attr", None)) == "get_impl" for a in n.args]
    refs = {n.id for a in args for n in ast.walk(a) if isinstance(n, ast.Name)}
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in refs for t in node.targets):
            args.append(node.value)
    return args


def implementations_named(path: Path, root: Path = ROOT) -> set[str]:
    """The modules of the registered implementations ``path`` builds by name, so runs that enter it run their code
    too: in library code the names it passes to ``get_impl`` (EMBark's storages, the hashing trick's tables); in a
    benchmark module every registry name it mentions (its parametrized lists of systems). Docstrings never count."""
    table = registry_table(root)
    tree = _strip_docstrings(ast.parse(path.read_text(), str(path)))
    scope = [tree] if module_name(path, root).startswith("benchmarks") else _built_by_name(tree)
    return {table[n.value] for s in scope for n in ast.walk(s)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in table}


@lru_cache(maxsize=8)
def modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the project's packages, by dotted name."""
    return {module_name(p, root): p for pkg in PACKAGES for p in sorted((root / pkg).rglob("*.py"))}


def graph(package: str, root: Path = ROOT) -> dict[str, set[str]]:
    """The import graph of one package: each of its modules -> the modules of that package it imports."""
    mods = {m: p for m, p in modules(root).items() if m == package or m.startswith(package + ".")}
    return {m: {i for i in imports_of(p, root) if i in mods and i != m} for m, p in mods.items()}


def _parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def closure(roots: tuple[str, ...], root: Path = ROOT, follow: tuple[str, ...] = (),
            exclude: tuple[str, ...] = ()) -> list[str]:
    """The project modules ``roots`` import, directly or not, with their packages' ``__init__``: every module under
    impls except those under an ``exclude`` prefix, and outside impls only ``follow``."""
    mods = modules(root)
    seen: set[str] = set()
    todo = [r for r in roots if r in mods]
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        for dep in [*imports_of(mods[m], root), *implementations_named(mods[m], root), *_parents(m)]:
            if dep in mods and dep not in seen and (dep.startswith("impls") or dep in follow) and not any(
                    dep == x or dep.startswith(x + ".") for x in exclude):
                todo.append(dep)
    return sorted(seen)


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return tree


_C_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_C_STRING = re.compile(r'"(?:\\.|[^"\\])*"')


def _registry_entries(node: ast.stmt) -> ast.expr | None:
    """The value of impls.registry's ``_MODULES`` assignment, or None for any other statement."""
    target = node.target if isinstance(node, ast.AnnAssign) else (
        node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
    if isinstance(target, ast.Name) and target.id == "_MODULES" and node.value is not None:
        return node.value
    return None


def _without_registry_entries(tree: ast.Module) -> ast.Module:
    """impls/registry.py with its registry table emptied: a point's own entry is in its fingerprint already (the module it
    names is a file of it), and another system's entry changes nothing the point runs, so registering a new system
    leaves every set that does not run it fresh."""
    for node in tree.body:
        if _registry_entries(node) is not None:
            node.value = ast.Dict(keys=[], values=[])
    return tree


def normalized(path: Path, text: str | None = None) -> bytes:
    """What a file does: a Python file's syntax tree without docstrings (impls/registry.py also without its registry
    table's entries), a C++ / CUDA file without comments and with whitespace collapsed (string literals kept as
    written). ``text``: the file's content (default: read it)."""
    text = path.read_text() if text is None else text
    if path.suffix == ".py":
        tree = _strip_docstrings(ast.parse(text, str(path)))
        if path.name == "registry.py" and path.parent.name == "impls":
            tree = _without_registry_entries(tree)
        return ast.dump(tree, annotate_fields=False, include_attributes=False).encode()
    strings: list[str] = []

    def keep(m: re.Match) -> str:
        strings.append(m.group(0))
        return f"\x00{len(strings) - 1}\x00"

    code = _C_COMMENT.sub(" ", _C_STRING.sub(keep, text))
    code = re.sub(r"\s+", " ", code).strip()
    return re.sub(r"\x00(\d+)\x00", lambda m: strings[int(m.group(1))], code).encode()


def code_hash(path: Path, text: str | None = None) -> str:
    """The hash of what ``path`` does (``normalized``; ``text``: its content, default read from disk)."""
    return hashlib.sha256(normalized(path, text)).hexdigest()[:16]


@lru_cache(maxsize=4096)
def _file_hash(path: Path, mtime_ns: int, size: int) -> str:
    text = path.read_text()
    return derived("code_hash", RULE, source_key(path, text), lambda: code_hash(path, text))


def source_key(path: Path, text: str, *more: Path) -> bytes:
    """What a value derived from ``path``'s ``text`` depends on, for the cache (derived_cache.py)."""
    return "\0".join([str(path), *map(str, more), text]).encode("utf-8", "surrogateescape")


_COMMIT = re.compile(r"[0-9a-f]{7,64}")


def is_commit(text: object) -> bool:
    """Whether ``text`` is a commit id (7 to 64 lowercase hex digits): what a record says is checked before any git
    call, so a value such as ``--output=...`` never reaches git as an option."""
    return isinstance(text, str) and _COMMIT.fullmatch(text) is not None


@lru_cache(maxsize=8192)
def file_hash_at(commit: str, rel: str, root: Path = ROOT) -> str | None:
    """The hash ``file_hash`` gives ``rel`` as committed at ``commit`` (None: not in that commit, or no git).
    ValueError when ``commit`` is not a commit id (is_commit)."""
    import subprocess

    if not is_commit(commit):
        raise ValueError(f"{commit!r} is not a commit id (7 to 64 hex digits)")
    try:
        text = subprocess.run(["git", "show", f"{commit}:{rel}"], cwd=root, capture_output=True, text=True,
                              check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    try:
        return code_hash(root / rel, text)
    except SyntaxError:
        return None


def committed(files: dict[str, str], commit: str | None, root: Path = ROOT) -> bool | None:
    """Whether every file of a fingerprint's file map is, in what it does, as committed at ``commit`` (a run that
    git called dirty measured committed code when its uncommitted edits were elsewhere); None when this checkout
    cannot tell (no git, a shallow clone without that commit, no commit recorded)."""
    if not commit:
        return None
    if not is_commit(commit):
        raise ValueError(f"a record names commit {commit!r}, which is not a commit id (7 to 64 hex digits)")
    then = {rel: file_hash_at(commit, rel, root) for rel in files}
    if all(h is None for h in then.values()):
        return None
    return all(then[rel] == h for rel, h in files.items())


def file_hash(path: Path) -> str:
    st = path.stat()
    return _file_hash(path, st.st_mtime_ns, st.st_size)


def registry_table(root: Path = ROOT) -> dict[str, str]:
    """Implementation name -> module of every system of ours (impls/our_systems.py: read from the sources as they are
    now, nothing imported)."""
    from impls.our_systems import modules as our_systems

    return our_systems(root / "impls")
