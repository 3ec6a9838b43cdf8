"""``dlrmbench data synth``: a synthetic stream written to disk in the prepared layout (layout.py, multi-hot), so a
run can read the same samples back from memory-mapped files (and other tools can read them without this package).
``train`` holds batches 0, 1, ... of the source; ``val`` the held-out batches a run
evaluates on (the source's batches from HELD_OUT_START on). Written into ``<out>.partial``, renamed, COMPLETE last."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
import torch

from impls.data.batch import Batch
from impls.data.layout import Prepared, SplitWriter, load_prepared, write_meta
from impls.data.id_runs import run_index
from impls.data.staging import staged
from impls.data.sources import HELD_OUT_START
from impls.data.synthetic import SyntheticSource, SyntheticSpec
from impls.data.teachers import TEACHERS, VectorTeacher

CHUNK = 65536


def _write_split(source: SyntheticSource, d: Path, samples: int, start: int, chunk: int,
                 progress: Callable[[int], None] | None, teacher: VectorTeacher | None = None) -> None:
    T = len(source.tables)
    split = SplitWriter(d, samples, source.spec.num_dense, T, multi_hot=True)
    done, k = 0, 0
    while done < samples:
        B = min(chunk, samples - done)
        b = source.batch(start + k, B)
        if teacher is not None:  # the labels of another teacher (teachers.py), drawn per batch
            b = Batch(b.dense, b.sparse, torch.from_numpy(
                teacher.labels(b, np.random.default_rng([source.spec.seed, start + k, B, 0x7EC7]))))
        offs = b.sparse.offsets.numpy()
        L = np.diff(offs).reshape(T, B)  # table-major bag sizes
        vals = b.sparse.values.numpy()
        # table-major -> sample-major: bag (t, i) moves to sample i's run, tables in order
        order = np.arange(T * B).reshape(T, B).T.reshape(-1)
        starts, lens = offs[:-1][order], L.T.reshape(-1)
        pos = run_index(starts, lens)
        split.write(np.arange(done, done + B), b.dense.numpy(), b.labels.numpy().astype(np.int8), lengths=L.T,
                    values=vals[pos])
        done, k = done + B, k + 1
        if progress:
            progress(B)
    split.close()


def write_synthetic(name: str, spec: SyntheticSpec, out: Path, samples: int, val_samples: int | None = None,
                    chunk: int = CHUNK, progress: Callable[[int], None] | None = None,
                    teacher: str = "scalar") -> Prepared:
    """Write ``samples`` training samples (and ``val_samples``, default samples // 8, held out) of ``spec``, labelled
    by ``teacher`` (teachers.py: the stream's own ``scalar`` one, or ``vector``)."""
    if teacher not in TEACHERS:
        raise ValueError(f"teacher must be one of {TEACHERS}, got {teacher!r}")
    if samples <= 0:
        raise ValueError(f"samples must be > 0, got {samples}")
    val_samples = max(1, samples // 8) if val_samples is None else val_samples
    if val_samples < 0 or chunk <= 0:
        raise ValueError(f"need val_samples >= 0 and chunk > 0, got {val_samples}, {chunk}")
    out = Path(out)
    key = {"spec": repr(spec), "samples": samples, "val_samples": val_samples, "chunk": chunk,
           **({"teacher": teacher} if teacher != "scalar" else {})}  # a folder written before teachers is reused
    with staged(out, "synthetic", key) as stage:  # reused or refused when complete; a user's folder is refused
        if stage.reused:
            return load_prepared(out)
        partial = stage.path
        source = SyntheticSource(spec)
        relabel = VectorTeacher(spec.tables, spec.num_dense, spec.teacher_seed) if teacher == "vector" else None
        rows = {"train": samples, **({"val": val_samples} if val_samples else {})}
        for split, n in rows.items():
            _write_split(source, partial / split, n, 0 if split == "train" else HELD_OUT_START, chunk, progress,
                         relabel)
        meta = Prepared(name, out, rows, [t.num_embeddings for t in spec.tables], 0, [], None, 0,
                        [t.name for t in spec.tables], spec.num_dense, layout="multi-hot",
                        dims=[t.dim for t in spec.tables],
                        synthetic=repr(spec) + (f" teacher={teacher}" if teacher != "scalar" else ""), key=key)
        write_meta(partial, meta)
    return meta
