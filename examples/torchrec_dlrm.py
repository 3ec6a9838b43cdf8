"""TorchRec's DLRM with EcoRec's TT tables in place of EmbeddingBagCollection: train, save, load, predict.
Run: python examples/torchrec_dlrm.py [--steps N] [--out DIR]  (docs/library.md walks through it)."""
from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F
from torchrec import KeyedJaggedTensor
from torchrec.models.dlrm import DLRM
from torchrec.modules.embedding_configs import EmbeddingBagConfig, PoolingType
from torchrec.optim.optimizers import in_backward_optimizer_filter

from dlrmbench.systems import EcoRecEBC

TABLES = [  # the large tables become TT cores; the small one EcoRec keeps as a plain table (ebc.kept_dense())
    EmbeddingBagConfig(name="user", embedding_dim=16, num_embeddings=200_000, feature_names=["user"]),
    EmbeddingBagConfig(name="item", embedding_dim=16, num_embeddings=50_000, feature_names=["item", "last_item"]),
    EmbeddingBagConfig(name="genre", embedding_dim=16, num_embeddings=30, feature_names=["genre"],
                       pooling=PoolingType.MEAN),
]
DENSE, BATCH = 4, 256


def batch(gen: torch.Generator) -> tuple[torch.Tensor, KeyedJaggedTensor, torch.Tensor]:
    """A synthetic batch: 4 dense features, one id per user and item bag, 0-3 genres; the label depends on both."""
    users = torch.randint(0, 200_000, (BATCH,), generator=gen)
    items = torch.randint(0, 50_000, (2 * BATCH,), generator=gen)
    genre_len = torch.randint(0, 4, (BATCH,), generator=gen)
    genres = torch.randint(0, 30, (int(genre_len.sum()),), generator=gen)
    kjt = KeyedJaggedTensor(keys=["user", "item", "last_item", "genre"], values=torch.cat([users, items, genres]),
                            lengths=torch.cat([torch.ones(3 * BATCH, dtype=torch.long), genre_len]))
    dense = torch.randn(BATCH, DENSE, generator=gen)
    labels = ((users % 7 < 3) ^ (items[:BATCH] % 5 < 2) ^ (dense[:, 0] > 0)).float()
    return dense, kjt, labels


def build() -> tuple[DLRM, EcoRecEBC]:
    ebc = EcoRecEBC(TABLES, optimizer=(torch.optim.Adagrad, {"lr": 0.05}), ranks=16)
    model = DLRM(embedding_bag_collection=ebc, dense_in_features=DENSE, dense_arch_layer_sizes=[32, 16],
                 over_arch_layer_sizes=[32, 1])
    return model, ebc


def main(steps: int, out: Path) -> None:
    torch.manual_seed(0)
    model, ebc = build()
    print("kept as plain tables:", ebc.kept_dense())
    # the tables update inside backward; the dense optimizer gets only the MLPs
    dense_opt = torch.optim.Adam([p for _, p in in_backward_optimizer_filter(model.named_parameters())], lr=1e-3)
    gen = torch.Generator().manual_seed(1)
    data = [batch(gen) for _ in range(8)]
    for step in range(steps):
        dense, sparse, labels = data[step % len(data)]
        loss = F.binary_cross_entropy_with_logits(model(dense, sparse).squeeze(1), labels)
        dense_opt.zero_grad()
        loss.backward()
        dense_opt.step()
        if step % 10 == 0 or step == steps - 1:
            print(f"step {step}: loss {loss.item():.4f}")
    # save: the module's state_dict holds the cores and the embedding optimizer's state
    torch.save({"model": model.state_dict(), "dense_opt": dense_opt.state_dict()}, out / "checkpoint.pt")
    # load into a fresh model and predict
    fresh, _ = build()
    fresh.load_state_dict(torch.load(out / "checkpoint.pt", weights_only=True)["model"])
    fresh.eval()
    dense, sparse, _ = data[0]
    with torch.no_grad():
        p = torch.sigmoid(fresh(dense, sparse).squeeze(1))
        q = torch.sigmoid(model(dense, sparse).squeeze(1))
    print(f"predicted {p.numel()} clicks, mean {p.mean():.3f}; loaded model agrees: {torch.equal(p, q)}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    if args.out is None:
        with tempfile.TemporaryDirectory() as d:
            main(args.steps, Path(d))
    else:
        args.out.mkdir(parents=True, exist_ok=True)
        main(args.steps, args.out)
