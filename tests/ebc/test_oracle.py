"""SystemEBC's pooled output against TorchRec's own EmbeddingBagCollection on copied weights, and against a float64
oracle (torch's embedding_bag over the system's dense tables): shared tables, per-sample weights, SUM and MEAN."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tests.ebc.cases import SYSTEMS, build, configs, kjt, torchrec

from torchrec import EmbeddingBagCollection  # noqa: E402


def oracle(ebc, cfgs, batch, weighted: bool) -> dict[str, torch.Tensor]:
    """float64 pooled output per output key, from the module's materialized tables."""
    parts = batch.to_dict()
    out = {}
    count = {}
    for c in cfgs:
        for f in c.feature_names:
            count[f] = count.get(f, 0) + 1
    for c in cfgs:
        w = ebc.materialize(c.name).double()
        mode = c.pooling.name.lower()
        for f in c.feature_names:
            jt = parts[f]
            psw = jt.weights().double() if weighted else None
            key = f if count[f] == 1 else f"{f}@{c.name}"
            out[key] = F.embedding_bag(jt.values(), w, jt.offsets(), mode=mode, per_sample_weights=psw,
                                       include_last_offset=True)
    return out


@pytest.mark.parametrize("system", SYSTEMS)
@pytest.mark.parametrize("shared,weighted", [(False, False), (True, False), (True, True)])
def test_pooled_equals_torchrec_and_float64(system, shared, weighted):
    cfgs = configs(shared=shared, mean=not weighted)
    ebc = build(system, cfgs, is_weighted=weighted)
    batch = kjt(cfgs, 6, seed=1, weighted=weighted)
    got = ebc(batch)
    ref = EmbeddingBagCollection(tables=cfgs, is_weighted=weighted)
    with torch.no_grad():
        for c in cfgs:
            ref.embedding_bags[c.name].weight.copy_(ebc.materialize(c.name))
    want = ref(batch)
    assert got.keys() == want.keys()
    assert got.length_per_key() == want.length_per_key()
    torch.testing.assert_close(got.values(), want.values(), atol=1e-5, rtol=1e-5)
    exact = oracle(ebc, cfgs, batch, weighted)
    for key, value in got.to_dict().items():
        torch.testing.assert_close(value.double(), exact[key], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("system", ["ecorec", "dense-torch"])
def test_outputs_equal_the_suites_collection(system):
    """One feature per table: the module's output is the suite's collection's on the same weights, as it is."""
    from impls.ebc.kjt import from_kjt

    cfgs = configs()
    ebc = build(system, cfgs)
    batch = kjt(cfgs, 5, seed=2)
    inner = ebc.collections[0]
    keys = batch.keys()
    want = inner(from_kjt(batch.permute([keys.index(f) for f in ('f0', 'f1', 'f2')])))
    torch.testing.assert_close(ebc(batch).values(), want, atol=0, rtol=0)


def test_errors_name_what_is_wrong():
    cfgs = configs()
    ebc = build("dense-torch", cfgs)
    with pytest.raises(ValueError, match="per-sample weights but the module is not weighted"):
        ebc(kjt(cfgs, 3, seed=0, weighted=True))
    with pytest.raises(ValueError, match="has no weights"):
        build("dense-torch", configs(mean=False), is_weighted=True)(kjt(cfgs, 3, seed=0))
    with pytest.raises(ValueError, match=r"no feature\(s\) \['f2'\]"):
        ebc(torchrec.KeyedJaggedTensor(keys=["f0", "f1"], values=torch.tensor([1, 2]),
                                       lengths=torch.tensor([1, 0, 1, 0])))
    with pytest.raises(ValueError, match="MEAN pooling with per-sample weights"):
        build("dense-torch", cfgs, is_weighted=True)
    with pytest.raises(ValueError, match="table 't2'.*id 75"):
        ebc(torchrec.KeyedJaggedTensor(keys=["f0", "f1", "f2"], values=torch.tensor([1, 2, 75]),
                                       lengths=torch.tensor([1, 1, 1])))


@pytest.mark.parametrize("spec", ["examples/template.py:Template", "examples/lowrank.py:LowRankEmbedding"])
def test_an_outside_system_gets_the_kjt_interface_without_writing_it(spec):
    """A system written from docs/adding-a-system.md (its EmbeddingCollection class, unregistered) as a SystemEBC:
    weighted, shared table, against torchrec's EBC."""
    import importlib.util
    from pathlib import Path

    from impls.ebc.module import SystemEBC

    path, cls_name = spec.split(":")
    mod_spec = importlib.util.spec_from_file_location(f"outside_{cls_name}", Path(__file__).parents[2] / path)
    mod = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(mod)
    cfgs = configs(shared=True, mean=False)
    from reproduce.conformance.cases import structure_options

    cls = getattr(mod, cls_name)
    ebc = SystemEBC(cfgs, cls, is_weighted=True, **structure_options(cls))
    batch = kjt(cfgs, 5, seed=4, weighted=True)
    got = ebc(batch)
    exact = oracle(ebc, cfgs, batch, True)
    for key, value in got.to_dict().items():
        torch.testing.assert_close(value.double(), exact[key], atol=1e-5, rtol=1e-5)
    got.values().sum().backward()
    assert all(p.grad is None for p in ebc.parameters())
