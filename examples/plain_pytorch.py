"""A plain PyTorch model over the suite's tables (no TorchRec model): TT-Rec's tables under a two-layer MLP, trained,
then exported with torch.export for inference.
Run: python examples/plain_pytorch.py [--steps N]  (docs/library.md walks through it)."""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from torch import nn
from torchrec import KeyedJaggedTensor
from torchrec.modules.embedding_configs import EmbeddingBagConfig, PoolingType

from dlrmbench.systems import TTRecEBC

TABLES = [EmbeddingBagConfig(name="query", embedding_dim=16, num_embeddings=100_000, feature_names=["query"],
                             pooling=PoolingType.MEAN),
          EmbeddingBagConfig(name="ad", embedding_dim=16, num_embeddings=20_000, feature_names=["ad"])]
BATCH = 128


class Ranker(nn.Module):
    def __init__(self, **embedding_options) -> None:
        super().__init__()
        self.embeddings = TTRecEBC(TABLES, optimizer=(torch.optim.Adagrad, {"lr": 0.1}), ranks=16,
                                   **embedding_options)
        self.mlp = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, sparse: KeyedJaggedTensor) -> torch.Tensor:
        return self.mlp(self.embeddings(sparse).values()).squeeze(1)


def batch(gen: torch.Generator) -> tuple[KeyedJaggedTensor, torch.Tensor]:
    """Up to 3 query terms (mean-pooled) and one ad; the label is a property of the ad (a clicked ad stays clicked)."""
    q_len = torch.randint(1, 4, (BATCH,), generator=gen)
    q = torch.randint(0, 100_000, (int(q_len.sum()),), generator=gen)
    ads = torch.randint(0, 20_000, (BATCH,), generator=gen)
    kjt = KeyedJaggedTensor(keys=["query", "ad"], values=torch.cat([q, ads]),
                            lengths=torch.cat([q_len, torch.ones(BATCH, dtype=torch.long)]))
    return kjt, (ads % 3 == 0).float()


def main(steps: int) -> None:
    torch.manual_seed(0)
    model = Ranker()
    mlp_opt = torch.optim.SGD(model.mlp.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(1)
    data = [batch(gen) for _ in range(4)]
    for step in range(steps):
        sparse, labels = data[step % len(data)]
        loss = F.binary_cross_entropy_with_logits(model(sparse), labels)
        mlp_opt.zero_grad()
        loss.backward()  # TT-Rec's cores update here, inside backward
        mlp_opt.step()
        if step % 10 == 0 or step == steps - 1:
            print(f"step {step}: loss {loss.item():.4f}")
    # inference: a copy without the host id check (check_bounds=False), exported with the number of ids dynamic
    served = Ranker(check_bounds=False)
    served.load_state_dict(model.state_dict())
    served.eval()
    sparse, _ = data[0]
    nnz = torch.export.Dim("nnz", min=2)
    with torch.no_grad():
        program = torch.export.export(served, (sparse,), dynamic_shapes={"sparse": [{0: nnz}, *[None] * 5]},
                                      strict=False)
        other, _ = data[1]
        same = torch.equal(program.module()(other), model(other))
    print(f"exported; scores a new batch as the trained model does: {same}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=40)
    main(ap.parse_args().steps)
