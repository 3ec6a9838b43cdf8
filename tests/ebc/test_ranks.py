"""SystemEBC over gloo ranks: EMBark's clusters (built from configs with a context, a communicator and a sample KJT
for its planner), and systems the suite shards (EcoRec table-wise, EL-Rec data-parallel: their dist_defaults). Each
rank's pooled output is TorchRec's EmbeddingBagCollection's on the gathered tables, and TorchRec's DLRM and DLRM_DCN
train with it."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from tests.ebc.cases import configs, kjt
from tests.sharding.ranks import run_ranks


def _rank(ctx, weighted: bool):
    return {system: _system(ctx, weighted, system) for system in SYSTEMS}


SYSTEMS = {"embark": {"cost": "hugectr"}, "ecorec": {"tt_min_rows": 0, "ranks": 4},
           "elrec": {"tt_min_rows": 0, "ranks": 4}}


def _system(ctx, weighted: bool, system: str):
    from torchrec import EmbeddingBagCollection
    from torchrec.models.dlrm import DLRM, DLRM_DCN
    from torchrec.optim.optimizers import in_backward_optimizer_filter

    from impls.ebc.module import SystemEBC
    from impls.sharding.comm import Comm

    cfgs = configs(shared=True, mean=not weighted)
    sample = kjt(cfgs, 32, seed=99, weighted=weighted)
    def build():
        return SystemEBC(cfgs, system, (torch.optim.SGD, {"lr": 0.1}), is_weighted=weighted, ctx=ctx, comm=Comm(ctx),
                         stats=sample if ctx.rank == 0 else None, **SYSTEMS[system])

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


def test_systems_over_two_ranks(tmp_path):
    """Weighted, with a shared table: the lookups layout (the bags layout is the single-process tests')."""
    for by_system in run_ranks(tmp_path, 2, _rank, True):
        assert set(by_system) == set(SYSTEMS)
        for system, (err, curves) in by_system.items():
            assert err < 1e-5, system
            for losses in curves:  # DLRM, DLRM_DCN
                assert sum(losses[-4:]) < sum(losses[:4]), (system, losses)
