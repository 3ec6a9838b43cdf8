"""A trained model kept on disk (`train --save DIR`), to score new rows (`predict`), a prepared split (`evaluate`)
or to train on (`train --resume DIR`). Any system, ours or outside, is kept one way: its ``state_dict`` (weights and
the collection's optimizer state, impls/state.py) with the MLP optimizer's.

DIR holds ``model.pt`` (torch.save: ``weights`` - the model's state_dict, the best evaluation's when early stop put
them back -, ``last`` - the state at the end when that differs -, ``mlp_optimizer``, ``loop`` - where the run was,
training.train_loop's state - and the torch RNG), ``model.json`` (the run's point, its tables, the digests) and
``preparation/`` (a copy of the prepared dataset's meta.json and vocab/: how raw rows become ids and features).
Loading checks the digest of model.pt and of preparation/ against model.json: a changed file is refused by name.
Written beside DIR first and renamed into place, so an interrupted save leaves the earlier model whole."""
from __future__ import annotations

import copy
import hashlib
import json
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

MODEL, INFO, PREPARATION = "model.pt", "model.json", "preparation"
FORMAT = 1


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def preparation_files(folder: Path) -> list[Path]:
    """The files that say what a prepared dataset's ids and features mean: meta.json and vocab/*."""
    folder = Path(folder)
    vocab = sorted((folder / "vocab").glob("*")) if (folder / "vocab").is_dir() else []
    return [folder / "meta.json", *vocab]


def preparation_digest(folder: Path) -> str:
    """sha256 over the names and bytes of ``preparation_files``."""
    folder = Path(folder)
    h = hashlib.sha256()
    for f in preparation_files(folder):
        if not f.is_file():
            raise ValueError(f"{f} is missing: {folder} is not a complete prepared dataset")
        h.update(str(f.relative_to(folder)).encode() + b"\0" + _sha256(f).encode() + b"\0")
    return h.hexdigest()


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
    info = {"format": FORMAT, "system": point.impl, "spec": outside_spec(point.impl), "point": point.to_dict(),
            "data": data,
            "tables": [asdict(t) for t in tables], "num_dense": num_dense, "model_digest": _sha256(partial / MODEL),
            "preparation_digest": digest, "stop": res.state["stop"], "steps": res.state["it"],
            "epochs": res.state["epoch"], "eval": res.curve[-1] if res.curve else None,
            "restored_best": res.last_weights is not None}
    (partial / INFO).write_text(json.dumps(info, indent=1, default=str) + "\n")
    old = folder.with_name(folder.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if folder.exists():
        folder.rename(old)  # the earlier model stays whole until the new one is in place
    partial.rename(folder)
    shutil.rmtree(old, ignore_errors=True)


def outside_spec(name: str) -> str | None:
    """The spec that loads an outside system (a file's path made absolute, so the model loads from any folder);
    None for one of ours."""
    from reproduce.harness.systems import source

    src = source(name)
    if src is None:
        return None
    target, _, cls = src.spec.rpartition(":")
    if target.endswith(".py"):
        target = str(Path(target).resolve())
    return f"{target}:{cls}"


def load(folder: Path) -> KeptModel:
    """Read a kept model, checking model.pt and preparation/ against the digests model.json holds."""
    import torch

    folder = Path(folder)
    info_path = folder / INFO
    if not info_path.is_file():
        raise ValueError(f"{folder} holds no kept model (no {INFO}): save one with `dlrmbench train ... --save DIR`")
    try:
        info = json.loads(info_path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{info_path} is not readable JSON ({exc})") from None
    if info.get("format") != FORMAT:
        raise ValueError(f"{info_path}: format {info.get('format')!r}, this version reads {FORMAT}")
    if not (folder / MODEL).is_file() or _sha256(folder / MODEL) != info["model_digest"]:
        raise ValueError(f"{folder / MODEL} is missing or changed since it was saved (its sha256 is not the one "
                         f"{INFO} holds)")
    if info["preparation_digest"] is not None and preparation_digest(folder / PREPARATION) != info["preparation_digest"]:
        raise ValueError(f"{folder / PREPARATION} changed since the model was saved (its digest is not the one "
                         f"{INFO} holds): its vocabulary or transforms are not the ones the model learned")
    saved = torch.load(folder / MODEL, map_location="cpu", weights_only=False)
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
