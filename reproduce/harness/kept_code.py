"""The code of an outside system as a kept model holds it (kept_model.py): a copy of its source under ``system/`` in
the model folder, by relative names, with the sha256 of every file.

Nothing in a model folder runs by itself. The kept copy says what code trained the model; the code that runs is the
one the user names (``--impl SPEC``) or an installed package declares under the system's name (the
``dlrmbench.systems`` entry point). Its files are hashed *before* it is imported, and a difference from the kept
copy is refused unless the user accepts it (``--accept-other-code``)."""
from __future__ import annotations

import hashlib
import importlib.util
import shutil
from dataclasses import dataclass
from pathlib import Path

SYSTEM = "system"  # the folder of a model folder that holds the outside system's source
ACCEPT = "--accept-other-code"


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def digest_of(files: dict[str, str]) -> str:
    """One sha256 over the relative names and sha256s of ``files``."""
    h = hashlib.sha256()
    for rel in sorted(files):
        h.update(rel.encode() + b"\0" + files[rel].encode() + b"\0")
    return h.hexdigest()


@dataclass(frozen=True)
class SystemCode:
    """Where a spec's source lies, found without importing it: ``root`` (the folder the relative names start in)
    and the files (relative name -> absolute path): the one file of ``file.py:Class``; every ``.py`` file of the
    top-level package of ``package.module:Class``."""

    spec: str
    root: Path
    paths: dict[str, Path]

    @classmethod
    def of(cls, spec: str) -> "SystemCode":
        target, sep, attr = spec.rpartition(":")
        if not sep or not target:
            raise ValueError(f"--impl {spec!r}: not a system spec (package.module:Class or path/to/file.py:Class)")
        if target.endswith(".py"):
            path = Path(target).resolve()
            if not path.is_file():
                raise ValueError(f"--impl {spec}: no file {path}")
            return cls(spec, path.parent, {path.name: path})
        top = target.split(".")[0]
        try:
            found = importlib.util.find_spec(top)  # a top-level name: finds its file, imports nothing
        except (ImportError, ValueError):
            found = None
        if found is None or found.origin is None:
            raise ValueError(f"--impl {spec}: cannot find the module {top!r} (install its package, or put its folder "
                             f"on PYTHONPATH)")
        origin = Path(found.origin).resolve()
        if found.submodule_search_locations:
            package = origin.parent
            files = {str(p.relative_to(package.parent)): p for p in sorted(package.rglob("*.py"))
                     if "__pycache__" not in p.parts}
            return cls(spec, package.parent, files)
        return cls(spec, origin.parent, {origin.name: origin})

    def hashes(self) -> dict[str, str]:
        return {rel: sha256_file(p) for rel, p in self.paths.items()}

    def kept_spec(self) -> str:
        """The spec of the kept copy, relative to the model folder: a file's name under system/, or the package
        spec itself (its folder under system/ put on PYTHONPATH)."""
        target, _, attr = self.spec.rpartition(":")
        return f"{SYSTEM}/{next(iter(self.paths))}:{attr}" if target.endswith(".py") else self.spec


def keep(spec: str, folder: Path) -> dict:
    """Copy the source of the system ``spec`` names into ``folder``/system/ and return what model.json keeps of it."""
    code = SystemCode.of(spec)
    files = code.hashes()
    for rel, path in code.paths.items():
        dest = folder / SYSTEM / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest)
    return {"spec": code.kept_spec(), "files": files, "digest": digest_of(files)}


def kept_hint(folder: Path, kept: dict) -> str:
    """How a user runs the kept copy, once they have read it."""
    spec = kept["spec"]
    if spec.startswith(SYSTEM + "/"):
        return f"--impl {folder / spec}"
    return f"PYTHONPATH={folder / SYSTEM} ... --impl {spec}"


def check(folder: Path, name: str, kept: dict, spec: str | None, accept: bool) -> str:
    """The spec to load for a model folder's outside system ``name`` (``kept``: model.json's record of its code):
    ``spec`` (the user's --impl) or the installed entry point of that name. Its files are hashed before anything of
    it is imported; ValueError when there is none, or when its code differs from the kept copy and ``accept`` is
    off."""
    from reproduce.harness.systems import installed

    if spec is None:
        ep = installed().get(name)
        if ep is None:
            raise ValueError(f"{folder} was trained with the outside system {name!r}, and nothing in a model folder runs "
                             f"by itself: name the code to run with --impl SPEC (the copy kept with the model, once "
                             f"you have read it: {kept_hint(folder, kept)}), or install the package that declares "
                             f"{name!r}")
        spec = ep.value
    files = SystemCode.of(spec).hashes()
    if digest_of(files) != kept["digest"] and not accept:
        differ = sorted(f for f in set(files) | set(kept["files"]) if files.get(f) != kept["files"].get(f))
        raise ValueError(f"the code of {name!r} that would run ({spec}) differs from the code that trained "
                         f"{folder} (kept in {folder / SYSTEM}; differing: {', '.join(differ)}): run the kept copy "
                         f"({kept_hint(folder, kept)}), or pass {ACCEPT} to load it anyway")
    return spec
