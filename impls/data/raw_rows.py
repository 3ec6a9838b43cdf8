"""New raw rows of a click log through the preparation a dataset was made with (`dlrmbench predict`): the same
parse, the same dense transforms with the training split's (mean, std), and the vocabulary fitted on the training
split, a value it does not hold going to the out-of-vocabulary row (impls/data/vocabulary.py); hashed fields hash
as they did. The rows need the dense and categorical columns the dataset was prepared from (a file without one is
refused naming it); the label column may be absent. Rows that cannot be read are skipped and reported by file and
line, as `data prepare` reports them; every scored row says where it came from."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from impls.api import TableSpec
from impls.data.layout import read_meta, vocab_keys
from impls.data.prepared_source import PreparedSource
from impls.data.tabular import hashed, raw_files, read_rows, sample_major, standardized, transformed
from impls.data.tabular_schema import Schema, SplitSpec
from impls.data.textio import Problems
from impls.data.vocabulary import oov_ids


class Preparation:
    """What a prepared click log's folder (its meta.json and vocab/, or a kept model's copy) says of its rows."""

    def __init__(self, folder: Path) -> None:
        folder = Path(folder)
        meta = read_meta(folder)
        prepared = meta.schema or {}
        if "columns" not in prepared or "vocabulary" not in prepared:
            raise ValueError(f"{folder}: not a click log prepared by this version's `data prepare tabular` (raw rows "
                             f"can be scored only through such a preparation; a synthetic or Criteo / Avazu dataset "
                             f"is scored with `evaluate`)")
        schema = Schema.from_dict(prepared["columns"])
        self.schema = dataclasses.replace(schema, split=SplitSpec("random"))  # a split needs no column here
        self.scale = prepared["dense_scale"]
        self.kept = {c.name: vocab_keys(folder, c.name) for c in schema.categorical if not c.hash}
        self.multi_hot = meta.layout == "multi-hot"

    def sources(self, raw: str | Path, tables: Sequence[TableSpec], problems: Problems
                ) -> Iterator[tuple[list[str], PreparedSource, bool]]:
        """(where each row came from, the rows as a source of batches over ``tables``, whether they carry labels)
        for every block of good rows of ``raw`` (a file, folder or glob)."""
        schema = self.schema
        for _, rows in read_rows(raw_files(raw), schema, problems, False, None, optional=(schema.label.column,)):
            n = len(rows)
            if n == 0:
                continue
            fields = []
            for c, (lens, keys) in zip(schema.categorical, rows.fields):
                ids = hashed(c, keys) if c.hash else oov_ids(keys, self.kept[c.name])
                fields.append((lens if lens is not None else np.ones(n, np.int64), ids))
            dense = standardized(transformed(rows.dense, schema), self.scale)
            arrays = {"dense": dense, "labels": rows.labels}
            if self.multi_hot:
                lengths, values = sample_major(fields, np.arange(n))
                offsets = np.zeros(n + 1, np.int64)
                np.cumsum(lengths.sum(axis=1), out=offsets[1:])
                arrays.update(lengths=lengths, row_offsets=offsets, values=values)
            else:
                arrays["sparse"] = np.stack([ids for _, ids in fields], axis=1)
            where = [rows.chunk.at(int(i)) for i in rows.kept_rows]
            yield where, PreparedSource.from_arrays(tables, **arrays), rows.labelled
