"""A trained model kept on disk (`train --save DIR`), to score new rows (`predict`), a prepared split (`evaluate`)
or to train on (`train --resume DIR`). Any system, ours or outside, is kept one way: its ``state_dict`` (weights and
the collection's optimizer state, impls/state.py) with the MLP optimizer's.

DIR holds ``model.pt`` (torch.save: ``weights`` - the model's state_dict, the best evaluation's when early stop put
them back -, ``last`` - the state at the end when that differs -, ``mlp_optimizer``, ``loop`` - where the run was,
training.train_loop's state - and the torch RNG), ``model.json`` (the run's point, its tables), ``preparation/``
(a copy of the prepared dataset's meta.json and vocab/: how raw rows become ids and features), for an outside system
``system/`` (a copy of its source, kept_code.py), and ``SHA256SUMS`` (every other file's sha256, as sha256sum
writes them). Loading checks every file against SHA256SUMS: a changed file is refused by name.

Nothing in a model folder executes code when loaded: model.pt loads weights-only (tensors and plain values; a pickle
that would build any other object is refused before it does), and an outside system's code runs only when the user
names it (kept_code.check). The digests guard against accidents; the weights-only load and the named code against a
folder someone else made. Written beside DIR first and renamed into place, so an interrupted save leaves the earlier
model whole."""
from __future__ import annotations

import copy
import json
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from reproduce.harness.kept_code import digest_of, sha256_file as _sha256

MODEL, INFO, PREPARATION, SUMS = "model.pt", "model.json", "preparation", "SHA256SUMS"
FORMAT = 2  # 1: no SHA256SUMS, an outside system named by an absolute spec (read for our systems only)


def preparation_files(folder: Path) -> list[Path]:
    """The files that say what a prepared dataset's ids and features mean: meta.json and vocab/*."""
    folder = Path(folder)
    vocab = sorted((folder / "vocab").glob("*")) if (folder / "vocab").is_dir() else []
    return [folder / "meta.json", *vocab]


def preparation_digest(folder: Path) -> str:
    """sha256 over the names and bytes of ``preparation_files`` (kept_code.digest_of)."""
    folder = Path(folder)
    for f in preparation_files(folder):
        if not f.is_file():
            raise ValueError(f"{f} is missing: {folder} is not a complete prepared dataset")
    return digest_of({str(f.relative_to(folder)): _sha256(f) for f in preparation_files(folder)})


@dataclass
class KeptModel:
    """A loaded DIR: model.json's fields and model.pt's content."""

    folder: Path
    info: dict[str, Any]
    saved: dict[str, Any]

    @property
    def point(self):
        from reproduce.harness.point import RunPoint

        return RunPoint.from_dict(self.info["point"])

    @property
    def tables(self):
        from impls.api import TableSpec

        return [TableSpec(**t) for t in self.info["tables"]]

    @property
    def preparation(self) -> Path:
        return self.folder / PREPARATION

    def check_data(self, data: Path) -> None:
        """Refuse a prepared dataset whose ids or features mean something else than the model's (its preparation
        digest differs)."""
        if preparation_digest(data) != self.info["preparation_digest"]:
            raise ValueError(f"{data} was not prepared as the data {self.folder} was trained on "
                             f"({self.info['data']}): its meta.json or vocabulary differs, so its ids and features "
                             f"mean something else; evaluate on a split of that dataset, or `predict` on raw rows")

    def build(self, device="cpu"):
        """The training step of the model (the system resolved, its state loaded): ``predict`` scores batches."""
        import torch

        from reproduce.harness.model_build import build_step

        point = self.point
        step = build_step(point, self.tables, self.info["num_dense"], torch.device(device))
        step.restore(self.saved["weights"])
        return step


def check_replaceable(folder: Path) -> None:
    """Refuse to put a model where a folder holds anything but a kept model (its files would be replaced), or where
    a file is."""
    folder = Path(folder)
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        raise ValueError(f"--save {folder}: a file or link is there; name a folder")
    if folder.is_dir() and any(folder.iterdir()) and not (folder / INFO).is_file():
        raise ValueError(f"--save {folder}: the folder holds files and no kept model ({INFO}); name a new folder "
                         f"(or a kept model's, to replace it)")


def save(folder: Path, point, tables, num_dense: int, data: str, step, res) -> None:
    """Keep a finished training run (``res``: its LoopResult) in ``folder`` (check_replaceable)."""
    import torch

    folder = Path(folder)
    check_replaceable(folder)
    if res.state is None:
        raise ValueError("only a training run (epochs > 0) can be kept")
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    content = {"weights": step.model.state_dict(), "last": res.last_weights,
               "mlp_optimizer": step.mlp_optimizer_state(), "loop": res.state, "rng": torch.get_rng_state()}
    torch.save(content, partial / MODEL)
    source = Path(data)
    if (source / "meta.json").is_file():
        for f in preparation_files(source):
            dest = partial / PREPARATION / f.relative_to(source)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f, dest)
        digest = preparation_digest(partial / PREPARATION)
    else:
        digest = None  # a synthetic stream: no preparation to keep
    info = {"format": FORMAT, "system": point.impl, "code": _keep_code(point.impl, partial), "point": point.to_dict(),
            "data": data,
            "tables": [asdict(t) for t in tables], "num_dense": num_dense, "model_digest": _sha256(partial / MODEL),
            "preparation_digest": digest, "stop": res.state["stop"], "steps": res.state["it"],
            "epochs": res.state["epoch"], "eval": res.curve[-1] if res.curve else None,
            "restored_best": res.last_weights is not None}
    (partial / INFO).write_text(json.dumps(info, indent=1, default=str) + "\n")
    _write_sums(partial)
    old = folder.with_name(folder.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if folder.exists():
        folder.rename(old)  # the earlier model stays whole until the new one is in place
    partial.rename(folder)
    shutil.rmtree(old, ignore_errors=True)


def _keep_code(name: str, folder: Path) -> dict | None:
    """An outside system's source copied into ``folder`` (kept_code.keep); None for one of ours."""
    from reproduce.harness.kept_code import keep
    from reproduce.harness.systems import source

    src = source(name)
    return None if src is None else keep(src.spec, folder)


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name != SUMS)


def _write_sums(folder: Path) -> None:
    lines = [f"{_sha256(p)}  {p.relative_to(folder).as_posix()}" for p in _files(folder)]
    (folder / SUMS).write_text("\n".join(lines) + "\n")


def _check_sums(folder: Path) -> None:
    """Every file of ``folder`` as SHA256SUMS lists it: none changed, none missing, none added."""
    listed: dict[str, str] = {}
    for n, line in enumerate((folder / SUMS).read_text(errors="replace").splitlines(), 1):
        digest, sep, rel = line.partition("  ")
        if not sep or len(digest) != 64 or not rel or rel.startswith("/") or ".." in Path(rel).parts:
            raise ValueError(f"{folder / SUMS} line {n}: not '<sha256>  <relative file name>' ({line[:80]!r})")
        listed[rel] = digest
    there = {p.relative_to(folder).as_posix(): p for p in _files(folder)}
    for rel in sorted(set(listed) | set(there)):
        if rel not in there:
            raise ValueError(f"{folder / rel} is missing: {SUMS} lists it")
        if rel not in listed:
            raise ValueError(f"{folder / rel} is not one of the model's files ({SUMS} does not list it): remove it, or "
                             f"save the model again")
        if _sha256(there[rel]) != listed[rel]:
            raise ValueError(f"{folder / rel} changed since the model was saved (its sha256 is not the one {SUMS} "
                             f"holds)")
    for rel in (MODEL, INFO):
        if rel not in listed:
            raise ValueError(f"{folder / SUMS} does not list {rel}: not a kept model")


def read_info(folder: Path) -> dict[str, Any]:
    """model.json of a kept model, every file checked first (SHA256SUMS; a format-1 folder: model.pt's digest)."""
    folder = Path(folder)
    info_path = folder / INFO
    if not info_path.is_file():
        raise ValueError(f"{folder} holds no kept model (no {INFO}): save one with `dlrmbench train ... --save DIR`")
    if (folder / SUMS).is_file():
        _check_sums(folder)
    try:
        info = json.loads(info_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{info_path} is not readable JSON ({exc})") from None
    if not isinstance(info, dict) or info.get("format") not in (1, FORMAT):
        got = info.get("format") if isinstance(info, dict) else None
        raise ValueError(f"{info_path}: format {got!r}, this version reads {FORMAT} (and 1)")
    if info["format"] == FORMAT and not (folder / SUMS).is_file():
        raise ValueError(f"{folder / SUMS} is missing: the model's files cannot be checked")
    if info["format"] == 1:
        if info.get("spec"):
            raise ValueError(f"{folder} was kept by an earlier version that named its outside system's code by an "
                             f"absolute path ({info['spec']}) and keeps no copy of it: train it again to keep it")
        if not (folder / MODEL).is_file() or _sha256(folder / MODEL) != info.get("model_digest"):
            raise ValueError(f"{folder / MODEL} is missing or changed since it was saved (its sha256 is not the one "
                             f"{INFO} holds)")
        if info.get("preparation_digest") is not None and \
                preparation_digest(folder / PREPARATION) != info["preparation_digest"]:
            raise ValueError(f"{folder / PREPARATION} changed since the model was saved (its digest is not the one "
                             f"{INFO} holds): its vocabulary or transforms are not the ones the model learned")
    return info


def system_spec(folder: Path, info: dict[str, Any], spec: str | None = None, accept: bool = False) -> str:
    """What loads a kept model's system: its name (one of ours), else the outside code the user names (``spec``)
    or an installed package declares, checked against the copy kept with the model (kept_code.check)."""
    from reproduce.harness.kept_code import check

    if not info.get("code"):
        if spec is not None:
            raise ValueError(f"--impl {spec}: {folder} was trained with {info['system']!r}, a system of this suite; "
                             f"leave out --impl")
        return info["system"]
    return check(Path(folder), info["system"], info["code"], spec, accept)


def load(folder: Path) -> KeptModel:
    """Read a kept model: every file checked (read_info), model.pt loaded weights-only; no code of the folder runs."""
    import pickle

    import torch

    folder = Path(folder)
    info = read_info(folder)
    try:
        saved = torch.load(folder / MODEL, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, AttributeError, TypeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"{folder / MODEL} holds more than tensors and plain values, or is damaged; it is refused "
                         f"unloaded, as a kept model is weights only ({first})") from None
    if not isinstance(saved, dict) or "weights" not in saved:
        raise ValueError(f"{folder / MODEL}: not a kept model's content (no 'weights')")
    return KeptModel(folder, info, saved)


def resume_state(kept: KeptModel, point, step) -> tuple[dict[str, Any], Any]:
    """Load the kept run's end state into ``step`` for ``point`` (the same run with more epochs): the loop's start
    and, with early stop, the best evaluation's weights. ValueError naming what differs."""
    import torch

    saved_point = kept.info["point"]
    now = point.to_dict()
    differ = sorted(k for k in set(now) | set(saved_point) if k != "epochs" and now.get(k) != saved_point.get(k))
    if differ:
        said = "; ".join(f"{k}: {saved_point.get(k)!r} saved, {now.get(k)!r} now" for k in differ)
        raise ValueError(f"--resume {kept.folder}: the run differs from the one kept in more than --epochs ({said})")
    loop = kept.saved["loop"]
    if loop["stop"] != "epochs done":
        raise ValueError(f"--resume {kept.folder}: that run stopped by {loop['stop']!r}, not after its epochs: there "
                         f"is nothing to go on with")
    if point.epochs <= loop["epoch"]:
        raise ValueError(f"--resume {kept.folder}: it trained {loop['epoch']} epoch(s); ask for more with --epochs")
    last = kept.saved["last"] if kept.saved["last"] is not None else kept.saved["weights"]
    step.restore(last)
    step.load_mlp_optimizer_state(kept.saved["mlp_optimizer"])
    torch.set_rng_state(kept.saved["rng"])
    best = copy.deepcopy(kept.saved["weights"]) if point.early_stop else None  # the loaded state may alias the saved
    return loop, best


def scores(step, source, batch_size: int):
    """Click probabilities (float64) of every row of ``source``, in order, scored a batch at a time (the last batch
    wrapped around and cut)."""
    import numpy as np

    n, out = source.num_rows, []
    for k in range(-(-n // batch_size)):
        out.append(step.predict(source.batch(k, batch_size)).double().numpy())
    return np.concatenate(out)[:n]
