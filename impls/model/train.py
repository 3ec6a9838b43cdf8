"""One training step, split into the phases the harness times (forward, backward, update).

Two modes: ``dlrm`` trains the whole model on BCE loss; ``embedding-only`` drives the embedding
collection alone with a fixed synthetic upstream gradient (how EcoRec's throughput runs work).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from impls.api import EmbeddingCollection
from impls.data.batch import Batch
from impls.model.dlrm import DLRM

MODES = ("dlrm", "embedding-only")


class TrainStep:
    def __init__(
        self,
        embeddings: EmbeddingCollection,
        mode: str = "dlrm",
        num_dense: int = 13,
        dense_lr: float = 0.1,
        seed: int = 0,
        bottom: tuple[int, ...] = (512, 256),
        top: tuple[int, ...] = (512, 256),
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self.mode = mode
        self.embeddings = embeddings
        self._upstream: dict[tuple, Tensor] = {}
        self.seed = seed
        if mode == "dlrm":
            torch.manual_seed(seed)
            self.model = DLRM(embeddings, num_dense, bottom, top)
            dense_params = [p for n, p in self.model.named_parameters() if not n.startswith("embeddings.")]
            self.dense_opt = torch.optim.SGD(dense_params, lr=dense_lr)
        else:
            self.model = None
            self.dense_opt = None

    def upstream_grad(self, out: Tensor) -> Tensor:
        """A fixed random gradient for the embedding output (one per shape), scaled like a mean loss."""
        key = (tuple(out.shape), out.device)
        if key not in self._upstream:
            g = torch.Generator().manual_seed(self.seed + 17)
            self._upstream[key] = (torch.randn(out.shape, generator=g) / out.shape[0]).to(out.device)
        return self._upstream[key]

    def prefetch(self, batch: Batch) -> None:
        """Tell the embeddings the next batch at the start of a step (a load pipeline may start on it)."""
        self.embeddings.prefetch(batch.sparse)

    def forward(self, batch: Batch) -> Tensor:
        """The loss of one batch (a scalar)."""
        if self.model is None:
            out = self.embeddings(batch.sparse)
            return (out * self.upstream_grad(out)).sum()
        return F.binary_cross_entropy_with_logits(self.model(batch), batch.labels)

    def backward(self, loss: Tensor) -> None:
        loss.backward()

    def update(self) -> None:
        if self.dense_opt is not None:
            self.dense_opt.step()
            self.dense_opt.zero_grad(set_to_none=True)
        self.embeddings.optimizer_step()

    def __call__(self, batch: Batch) -> float:
        loss = self.forward(batch)
        self.backward(loss)
        self.update()
        return float(loss.detach())

    @torch.no_grad()
    def predict(self, batch: Batch) -> Tensor:
        """Click probabilities [B] (dlrm mode only)."""
        if self.model is None:
            raise ValueError("predict needs mode='dlrm'")
        return torch.sigmoid(self.model(batch))
