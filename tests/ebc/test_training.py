"""TorchRec's DLRM and DLRM_DCN train with each system's SystemEBC in place of EmbeddingBagCollection, with no glue:
the embedding update runs inside backward and the dense optimizer steps only what in_backward_optimizer_filter
leaves it."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tests.ebc.cases import SYSTEMS, build, configs, kjt

from torchrec.models.dlrm import DLRM, DLRM_DCN  # noqa: E402
from torchrec.optim.optimizers import in_backward_optimizer_filter  # noqa: E402

B, DENSE, STEPS = 16, 4, 20


def model_of(kind: str, ebc):
    if kind == "dlrm":
        return DLRM(embedding_bag_collection=ebc, dense_in_features=DENSE, dense_arch_layer_sizes=[16, 8],
                    over_arch_layer_sizes=[16, 1])
    return DLRM_DCN(embedding_bag_collection=ebc, dense_in_features=DENSE, dense_arch_layer_sizes=[16, 8],
                    over_arch_layer_sizes=[16, 1], dcn_num_layers=2, dcn_low_rank_dim=4)


def batches(cfgs, n: int = 2):
    g = torch.Generator().manual_seed(7)
    return [(torch.randn(B, DENSE, generator=g), kjt(cfgs, B, seed=10 + i),
             torch.randint(0, 2, (B,), generator=g).float()) for i in range(n)]


def train(model, data, dense_params, steps: int = STEPS) -> list[float]:
    opt = torch.optim.Adam(dense_params, lr=0.01)
    losses = []
    for step in range(steps):
        dense, sparse, labels = data[step % len(data)]
        loss = F.binary_cross_entropy_with_logits(model(dense, sparse).squeeze(1), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("kind", ["dlrm", "dcn"])
@pytest.mark.parametrize("system", SYSTEMS)
def test_torchrec_models_train(system, kind):
    torch.manual_seed(0)
    cfgs = configs(shared=True)
    ebc = build(system, cfgs, optimizer=(torch.optim.Adagrad, {"lr": 0.05}))
    model = model_of(kind, ebc)
    dense = [p for _, p in in_backward_optimizer_filter(model.named_parameters())]
    fused = [p for _, p in in_backward_optimizer_filter(model.named_parameters(), include=True)]
    assert {id(p) for p in fused} == {id(p) for p in ebc.parameters()}
    assert not {id(p) for p in dense} & {id(p) for p in fused}
    before = {t.name: ebc.materialize(t.name).clone() for t in cfgs}
    losses = train(model, batches(cfgs), dense)
    assert sum(losses[-4:]) < sum(losses[:4]), losses
    for t in cfgs:  # every table moved: the update ran inside backward, with no optimizer_step called
        assert not torch.equal(before[t.name], ebc.materialize(t.name)), t.name
    assert all(p.grad is None for p in ebc.parameters())


@pytest.mark.parametrize("kind", ["dlrm", "dcn"])
@pytest.mark.parametrize("system", ["ecorec", "ttrec", "dense-torch", "qr"])
def test_the_model_scores_as_with_torchrecs_own_tables_on_the_same_weights(system, kind):
    """The whole model's logits with the system's module equal TorchRec's model over its own EmbeddingBagCollection
    holding the same tables and the same MLP weights."""
    from torchrec import EmbeddingBagCollection

    cfgs = configs(shared=True)
    ebc = build(system, cfgs)
    ref_ebc = EmbeddingBagCollection(tables=cfgs)
    with torch.no_grad():
        for c in cfgs:
            ref_ebc.embedding_bags[c.name].weight.copy_(ebc.materialize(c.name))
    torch.manual_seed(0)
    model = model_of(kind, ebc)
    torch.manual_seed(0)
    ref = model_of(kind, ref_ebc)
    ref.load_state_dict({k: v for k, v in model.state_dict().items() if "embedding_bag_collection" not in k},
                        strict=False)
    dense, sparse, _ = batches(cfgs, 1)[0]
    with torch.no_grad():
        torch.testing.assert_close(model(dense, sparse), ref(dense, sparse), atol=1e-5, rtol=1e-5)
