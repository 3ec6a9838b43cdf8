"""EMBark's clusters as a SystemEBC over gloo ranks: built from configs with a context, a communicator and a sample
KJT for its planner; each rank's pooled output is TorchRec's EmbeddingBagCollection's on the gathered tables, and
TorchRec's DLRM and DLRM_DCN train with it."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from tests.ebc.cases import configs, kjt
from tests.sharding.ranks import run_ranks


def _rank(ctx, weighted: bool):
    from torchrec import EmbeddingBagCollection
    from torchrec.models.dlrm import DLRM, DLRM_DCN
    from torchrec.optim.optimizers import in_backward_optimizer_filter

    from impls.ebc.module import EMBarkEBC
    from impls.sharding.comm import Comm

    cfgs = configs(shared=True, mean=not weighted)
    sample = kjt(cfgs, 32, seed=99, weighted=weighted)
    def build():
        return EMBarkEBC(cfgs, optimizer=(torch.optim.SGD, {"lr": 0.1}), is_weighted=weighted, ctx=ctx, comm=Comm(ctx),
                         stats=sample if ctx.rank == 0 else None, cost="hugectr")

    ebc = build()
    batch = kjt(cfgs, 6, seed=ctx.rank, weighted=weighted)
    ref = EmbeddingBagCollection(tables=cfgs, is_weighted=weighted)
    with torch.no_grad():
        for c in cfgs:
            ref.embedding_bags[c.name].weight.copy_(ebc.collection_of(c.name).gather_table(c.name))
    err = float((ebc(batch).values() - ref(batch).values()).abs().max())
    g = torch.Generator().manual_seed(ctx.rank)
    dense, labels = torch.randn(6, 3, generator=g), torch.randint(0, 2, (6,), generator=g).float()
    curves = []
    for model in (DLRM(embedding_bag_collection=ebc, dense_in_features=3, dense_arch_layer_sizes=[8, 8],
                       over_arch_layer_sizes=[8, 1]),
                  DLRM_DCN(embedding_bag_collection=build(), dense_in_features=3, dense_arch_layer_sizes=[8, 8],
                           over_arch_layer_sizes=[8, 1], dcn_num_layers=2, dcn_low_rank_dim=4)):
        opt = torch.optim.SGD([p for _, p in in_backward_optimizer_filter(model.named_parameters())], lr=0.05)
        losses = []
        for _ in range(20):
            loss = F.binary_cross_entropy_with_logits(model(dense, batch).squeeze(1), labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        curves.append(losses)
    return err, curves


def test_embark_over_two_ranks(tmp_path):
    """Weighted, with a shared table: the lookups layout (the bags layout is the other systems' tests')."""
    for err, curves in run_ranks(tmp_path, 2, _rank, True):
        assert err < 1e-5
        for losses in curves:  # DLRM, DLRM_DCN
            assert sum(losses[-4:]) < sum(losses[:4]), losses
