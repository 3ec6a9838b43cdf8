"""DLRM (Naumov et al. 2019): bottom MLP over dense features, an interaction with the pooled embeddings, top
MLP to one logit. Interactions: ``dot`` (DLRM's pairwise dot products) or ``dcnv2`` (DCN-V2's low-rank cross
network over the concatenated features, as MLPerf's DLRMv2 - the DLRM-DCNv2 workload EMBark trains - uses it:
3 cross layers of rank 512, capped here at the input width). Works with any EmbeddingCollection."""
from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor, nn

from impls.api import EmbeddingCollection
from impls.data.batch import Batch
from impls.model.choices import INTERACTIONS


def mlp(sizes: Sequence[int], last_activation: bool) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(nn.Linear(a, b))
        if i < len(sizes) - 2 or last_activation:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def dot_interaction(dense: Tensor | None, pooled: Tensor, dim: int) -> Tensor:
    """dense [B, D] (or None: a dataset without dense features, e.g. Avazu), pooled [B, T*D] ->
    [B, D + (T+1)*T/2]: dense concatenated with the strictly lower triangle of the pairwise dot products of
    the T+1 vectors (dlrm's default, no self-interaction); without dense, the T*(T-1)/2 products alone."""
    B = pooled.shape[0]
    x = pooled.view(B, -1, dim)
    if dense is not None:
        x = torch.cat([dense.unsqueeze(1), x], dim=1)  # [B, T+1, D]
    z = torch.bmm(x, x.transpose(1, 2))
    n = x.shape[1]
    li, lj = torch.tril_indices(n, n, offset=-1, device=x.device)
    return z[:, li, lj] if dense is None else torch.cat([dense, z[:, li, lj]], dim=1)


class LowRankCross(nn.Module):
    """DCN-V2's cross network with low-rank weights: x_{l+1} = x_0 * (U_l (V_l x_l) + b_l) + x_l."""

    def __init__(self, width: int, layers: int = 3, rank: int = 512) -> None:
        super().__init__()
        rank = max(1, min(rank, width))
        self.V = nn.ModuleList(nn.Linear(width, rank, bias=False) for _ in range(layers))
        self.U = nn.ModuleList(nn.Linear(rank, width) for _ in range(layers))

    def forward(self, x0: Tensor) -> Tensor:
        x = x0
        for V, U in zip(self.V, self.U):
            x = x0 * U(V(x)) + x
        return x


class DLRM(nn.Module):
    def __init__(
        self,
        embeddings: EmbeddingCollection,
        num_dense: int,
        bottom: Sequence[int] = (512, 256),
        top: Sequence[int] = (512, 256),
        interaction: str = "dot",
        cross_layers: int = 3,
        cross_rank: int = 512,
    ) -> None:
        super().__init__()
        if interaction not in INTERACTIONS:
            raise ValueError(f"interaction must be one of {INTERACTIONS}, got {interaction!r}")
        dims = {t.dim for t in embeddings.tables}
        if num_dense < 0:
            raise ValueError(f"num_dense must be >= 0, got {num_dense}")
        if interaction == "dot" and len(dims) != 1:
            raise ValueError(f"dot interaction needs one embedding dim for all tables, got {sorted(dims)} "
                             f"(the dcnv2 interaction takes mixed dims)")
        d = max(dims)
        self.embeddings, self.dim, self.interaction = embeddings, d, interaction
        # no dense features: no bottom MLP, the interaction sees the pooled embeddings alone
        self.bottom = mlp([num_dense, *bottom, d], last_activation=True) if num_dense else None
        if interaction == "dot":
            n = len(embeddings.tables) + (1 if num_dense else 0)
            width = (d if num_dense else 0) + n * (n - 1) // 2
            self.cross = None
        else:
            width = (d if num_dense else 0) + sum(t.dim for t in embeddings.tables)
            self.cross = LowRankCross(width, cross_layers, cross_rank)
        self.top = mlp([width, *top, 1], last_activation=False)

    def forward(self, batch: Batch) -> Tensor:
        """Logits [B]."""
        dense = self.bottom(batch.dense) if self.bottom is not None else None
        pooled = self.embeddings(batch.sparse)
        if self.cross is None:
            return self.top(dot_interaction(dense, pooled, self.dim)).squeeze(1)
        x0 = pooled if dense is None else torch.cat([dense, pooled], dim=1)
        return self.top(self.cross(x0)).squeeze(1)
