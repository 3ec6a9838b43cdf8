"""The suite's embedding systems for a model of your own (docs/library.md).

Each is a drop-in for TorchRec's ``EmbeddingBagCollection``: built from ``EmbeddingBagConfig``s, fed a
``KeyedJaggedTensor``, returning a ``KeyedTensor``; the embedding optimizer is declared at construction and runs inside
backward (``in_backward_optimizer_filter`` gives your optimizer the rest)::

    from dlrmbench.systems import EcoRecEBC
    ebc = EcoRecEBC(configs, optimizer=(torch.optim.Adagrad, {"lr": 0.05}))
    model = torchrec.models.dlrm.DLRM(embedding_bag_collection=ebc, ...)

``SystemEBC(configs, "name", ...)`` takes any registered system by name (``systems()`` lists them), an outside one
included once registered. ``load_model(dir)`` turns a model kept by ``dlrmbench train --save DIR`` into a plain module
that scores a batch."""
from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor, nn

from impls.api import EmbeddingOptim, TableSpec, registered_names
from impls.ebc.module import (DenseTorchEBC, ELRecEBC, EMBarkEBC, EcoRecEBC, FbgemmEBC, HashEBC, MDEBC, QREBC,
                              SystemEBC, TTRecEBC)

__all__ = ["SystemEBC", "TTRecEBC", "ELRecEBC", "EcoRecEBC", "EMBarkEBC", "DenseTorchEBC", "FbgemmEBC", "HashEBC",
           "QREBC", "MDEBC", "EmbeddingOptim", "KeptDLRM", "load_model", "systems"]


def systems() -> list[str]:
    """The registry names SystemEBC takes."""
    return registered_names()


class KeptDLRM(nn.Module):
    """A kept model (``dlrmbench train --save DIR``) as a plain module: ``forward(dense, sparse)`` scores a batch.

    Args of forward:
        dense: float [B, num_dense] dense features, as the model's preparation made them (``dlrmbench predict``
            does that from raw rows).
        sparse: a KeyedJaggedTensor with one feature per table, keyed by the table's name (``tables``), ids as the
            preparation's vocabulary numbered them.
    Returns click probabilities [B].
    """

    def __init__(self, model: nn.Module, tables: list[TableSpec], num_dense: int) -> None:
        super().__init__()
        self.model = model
        self.tables = tables
        self.num_dense = num_dense

    def forward(self, dense: Tensor, sparse) -> Tensor:
        from impls.data.batch import Batch
        from impls.ebc.kjt import from_kjt

        if dense.dim() != 2 or dense.shape[1] != self.num_dense:
            raise ValueError(f"dense must be [B, {self.num_dense}], got {tuple(dense.shape)}")
        features = from_kjt(sparse, self.tables)
        if features.batch_size != dense.shape[0]:
            raise ValueError(f"dense has {dense.shape[0]} rows, the KeyedJaggedTensor a batch of {features.batch_size}")
        return torch.sigmoid(self.model(Batch(dense, features, dense.new_zeros(dense.shape[0]))))


def load_model(folder: str | Path, device: str | torch.device = "cpu") -> KeptDLRM:
    """The model kept in ``folder`` as a KeptDLRM, in eval mode. Every file is checked against the folder's digests and
    model.pt loads weights-only: nothing in the folder runs (reproduce/harness/kept_model.py); a model of an outside
    system is refused here (load it with ``dlrmbench predict --impl``, which names its code)."""
    from reproduce.harness.kept_model import load

    kept = load(Path(folder))
    if kept.info.get("code"):
        raise ValueError(f"{folder} was trained with an outside system ({kept.info['system']!r}): its code runs only "
                         f"where you name it; use `dlrmbench predict --impl FILE.py:Class`")
    step = kept.build(device)
    if step.model is None:
        raise ValueError(f"{folder} was trained embedding-only: it has no model that scores a batch")
    return KeptDLRM(step.model, kept.tables, kept.info["num_dense"]).eval()
