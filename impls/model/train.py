"""One training step, split into the phases the harness times (forward, backward, update).

Two modes: ``dlrm`` trains the whole model on BCE loss; ``embedding-only`` drives the embedding
collection alone with a fixed synthetic upstream gradient (how EcoRec's throughput runs work).

Distributed (``comm`` given): each rank steps on its slice of a global batch of ``global_batch`` samples. Its
loss is its share of the global mean (the sum of its sample losses over the global batch size), so gradients
summed over ranks are those of the global batch: the MLPs are data-parallel with a summing all-reduce, and a
run over G ranks takes the same step as one process over the whole batch.
"""
from __future__ import annotations

from typing import Any, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from impls.api import EmbeddingCollection
from impls.data.batch import Batch
from impls.data.loader import rank_rows
from impls.model.choices import MLP_OPTIMIZER_CLASSES, MODES
from impls.model.dlrm import DLRM

MLP_OPTIMIZERS = {name: getattr(torch.optim, cls) for name, cls in MLP_OPTIMIZER_CLASSES.items()}


class TrainStep:
    def __init__(
        self,
        embeddings: EmbeddingCollection,
        mode: str = "dlrm",
        num_dense: int = 13,
        mlp_lr: float = 0.1,
        seed: int = 0,
        bottom: Sequence[int] = (512, 256),
        top: Sequence[int] = (512, 256),
        comm: Any | None = None,
        global_batch: int | None = None,
        mlp_optimizer: str = "sgd",
        interaction: str = "dot",
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if mlp_optimizer not in MLP_OPTIMIZERS:
            raise ValueError(f"mlp_optimizer must be one of {sorted(MLP_OPTIMIZERS)}, got {mlp_optimizer!r}")
        if comm is not None and not global_batch:
            raise ValueError("a distributed step needs the global batch size")
        self.mode = mode
        self.comm = comm
        self.global_batch = global_batch
        self.embeddings = embeddings
        self._upstream: dict[tuple, Tensor] = {}
        self.seed = seed
        if mode == "dlrm":
            torch.manual_seed(seed)
            self.model = DLRM(embeddings, num_dense, bottom, top, interaction=interaction)
            dense_params = [p for n, p in self.model.named_parameters() if not n.startswith("embeddings.")]
            self.dense_opt = MLP_OPTIMIZERS[mlp_optimizer](dense_params, lr=mlp_lr)
        else:
            self.model = None
            self.dense_opt = None

    def _global(self, local: int) -> tuple[int, int, int]:
        """(global batch, first row, last row) of this rank's slice."""
        if self.comm is None:
            return local, 0, local
        ctx = self.comm.ctx
        lo, hi = rank_rows(self.global_batch, ctx.rank, ctx.world_size)
        if hi - lo != local:
            raise ValueError(f"rank {ctx.rank} got {local} samples; its slice of {self.global_batch} has {hi - lo}")
        return self.global_batch, lo, hi

    def upstream_grad(self, out: Tensor) -> Tensor:
        """A fixed random gradient for the embedding output (one per shape), scaled like a mean loss; a rank
        gets its rows of the gradient of the global batch."""
        key = (tuple(out.shape), out.device)
        if key not in self._upstream:
            B, lo, hi = self._global(out.shape[0])
            g = torch.Generator().manual_seed(self.seed + 17)
            self._upstream[key] = (torch.randn((B, *out.shape[1:]), generator=g)[lo:hi] / B).to(out.device)
        return self._upstream[key]

    def prefetch(self, batch: Batch) -> None:
        """Tell the embeddings the next batch at the start of a step (a load pipeline may start on it)."""
        self.embeddings.prefetch(batch.sparse)

    def forward(self, batch: Batch) -> Tensor:
        """The loss of one batch (a scalar)."""
        if self.model is None:
            out = self.embeddings(batch.sparse)
            return (out * self.upstream_grad(out)).sum()
        if self.comm is None:
            return F.binary_cross_entropy_with_logits(self.model(batch), batch.labels)
        B, _, _ = self._global(batch.batch_size)
        return F.binary_cross_entropy_with_logits(self.model(batch), batch.labels, reduction="sum") / B

    def backward(self, loss: Tensor) -> None:
        loss.backward()

    @torch.no_grad()
    def _reduce_mlp(self) -> None:
        params = [p for g in self.dense_opt.param_groups for p in g["params"]]
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        for p, g in zip(params, self.comm.all_reduce_coalesced(grads, "mlp.dp")):
            p.grad = g

    def update(self) -> None:
        if self.dense_opt is not None:
            if self.comm is not None:
                self._reduce_mlp()
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

    def weights(self) -> dict[str, Any]:
        """A copy of the model's state (every parameter and buffer of the MLPs and the embedding collection, and the
        collection's optimizer state, by ``state_dict``), to ``restore`` later (dlrm mode only). TypeError naming
        the entry for a state that is neither a plain tensor nor a collection's extra state."""
        import copy

        if self.model is None:
            raise ValueError("weights needs mode='dlrm'")
        out: dict[str, Any] = {}
        for key, value in self.model.state_dict().items():
            if key.endswith("_extra_state"):  # a collection's optimizer state (impls/state.py)
                out[key] = copy.deepcopy(value)
                continue
            if not isinstance(value, Tensor):
                raise TypeError(f"the model's state entry {key!r} is a {type(value).__name__}, not a tensor: its "
                                "weights cannot be copied and restored")
            out[key] = value.detach().clone()
        return out

    def restore(self, weights: dict[str, Any]) -> None:
        """Put back a copy ``weights`` made (every entry: load_state_dict, strict)."""
        if self.model is None:
            raise ValueError("restore needs mode='dlrm'")
        self.model.load_state_dict(weights)

    def mlp_optimizer_state(self) -> dict[str, Any]:
        """The MLP optimizer's state (Adam's moments and steps), for a resumed run."""
        if self.dense_opt is None:
            raise ValueError("the MLP optimizer needs mode='dlrm'")
        return self.dense_opt.state_dict()

    def load_mlp_optimizer_state(self, state: dict[str, Any]) -> None:
        if self.dense_opt is None:
            raise ValueError("the MLP optimizer needs mode='dlrm'")
        self.dense_opt.load_state_dict(state)
