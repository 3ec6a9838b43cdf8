"""Optimizer ownership that cannot be got wrong: every misuse of the old interface either cannot happen (the update
runs inside backward and leaves no gradient) or raises naming what to do instead."""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

from impls.api import EmbeddingOptim
from tests.ebc.cases import build, configs, kjt

from torchrec.optim.optimizers import in_backward_optimizer_filter  # noqa: E402

TT = ["ecorec", "elrec", "ttrec"]


def step(ebc, batch, upstream_seed: int = 0) -> None:
    out = ebc(batch).values()
    g = torch.Generator().manual_seed(upstream_seed)
    (out * torch.randn(out.shape, generator=g)).sum().backward()


@pytest.mark.parametrize("system,options", [("dense-torch", {}), ("ecorec", {}), ("ecorec", {"fused": False}),
                                            ("ecorec", {"tt_min_rows": 100}), ("qr", {}), ("md", {}), ("ttrec", {})])
@pytest.mark.parametrize("kind", ["sgd", "adagrad"])
def test_a_dense_optimizer_over_all_parameters_steps_nothing_twice(system, options, kind):
    """SGD / Adam handed model.parameters() (the old traps: 2x updates of the plain tables and, unfused, of the cores;
    Adam refusing sparse gradients) give the same tables as the filtered idiom: the tables hold no gradient when the
    dense optimizer steps."""
    cfgs = configs()
    optim = EmbeddingOptim(kind, lr=0.05)
    a, b = build(system, cfgs, optimizer=optim, **options), build(system, cfgs, optimizer=optim, **options)
    sgd, adam = torch.optim.SGD(a.parameters(), lr=0.05), torch.optim.Adam(b.parameters(), lr=0.05)
    ref = build(system, cfgs, optimizer=optim, **options)
    for i in range(3):
        batch = kjt(cfgs, 5, seed=i)
        for m, opt in ((a, sgd), (b, adam), (ref, None)):
            if opt is not None:
                opt.zero_grad()
            step(m, batch, i)
            if opt is not None:
                opt.step()
    for t in cfgs:
        torch.testing.assert_close(a.materialize(t.name), ref.materialize(t.name), atol=0, rtol=0)
        torch.testing.assert_close(b.materialize(t.name), ref.materialize(t.name), atol=0, rtol=0)


@pytest.mark.parametrize("system,options", [("dense-torch", {}), ("qr", {}), ("ecorec", {"fused": False})])
def test_one_update_per_backward_over_two_forwards(system, options):
    """Two forwards summed into one backward update once, as one forward with both gradients does, wherever the
    update waits for the end of backward. (A fused TT update runs in each forward's own backward node, as TorchRec's
    fused tables do: two forwards are two updates there.)"""
    cfgs = configs()
    a, b = build(system, cfgs, **options), build(system, cfgs, **options)
    x = kjt(cfgs, 4, seed=3)
    (a(x).values().sum() + a(x).values().sum()).backward()
    (2 * b(x).values().sum()).backward()
    for t in cfgs:
        torch.testing.assert_close(a.materialize(t.name), b.materialize(t.name))


def test_misuse_raises():
    cfgs = configs()
    ebc = build("ecorec", cfgs)
    with pytest.raises(RuntimeError, match="inside backward"):
        ebc.optimizer_step()
    from torch.distributed.optim import _apply_optimizer_in_backward

    _apply_optimizer_in_backward(torch.optim.SGD, list(ebc.parameters())[:1], {"lr": 0.1})
    with pytest.raises(ValueError, match="stepped twice"):
        ebc(kjt(cfgs, 3, seed=0))
    with pytest.raises(ValueError, match="SGD and exact Adagrad"):
        build("ecorec", cfgs, optimizer=(torch.optim.Adam, {"lr": 0.1}))
    with pytest.raises(ValueError, match="momentum=0.9"):
        build("ecorec", cfgs, optimizer=(torch.optim.SGD, {"lr": 0.1, "momentum": 0.9}))
    with pytest.raises(ValueError, match=r"missing \['t2'\]"):
        build("ecorec", cfgs, optimizer={"t0": EmbeddingOptim(), "t1": EmbeddingOptim()})


def test_optimizer_per_table_and_the_keyed_view():
    """Tables declared with different optimizers train with their own; fused_optimizer exposes Adagrad's sums under
    the module's parameter names, as the state the update reads."""
    cfgs = configs()
    declared = {"t0": (torch.optim.Adagrad, {"lr": 0.1}), "t1": (torch.optim.SGD, {"lr": 0.1}),
                "t2": (torch.optim.Adagrad, {"lr": 0.1})}
    ebc = build("ecorec", cfgs, optimizer=declared)
    assert len(ebc.collections) == 2 and ebc.optims[0].kind == "adagrad"
    step(ebc, kjt(cfgs, 6, seed=4))
    fo = ebc.fused_optimizer
    state = fo.state_dict()["state"]
    names = dict(ebc.named_parameters())
    assert state and set(state) <= set(names)
    assert all(name.startswith("collections.0.") for name in state)  # t0 and t2's (Adagrad); SGD keeps none
    assert any(float(s["sum"].abs().sum()) > 0 for s in state.values())
    fo.step()  # nothing to do: the update ran in backward
    assert [g["optimizer"] for g in fo.param_groups] == ["adagrad", "sgd"]


@pytest.mark.parametrize("system", TT)
def test_kept_dense_tables_are_named_and_train_with_the_declared_optimizer(system):
    cfgs = configs()
    ebc = build(system, cfgs, optimizer=EmbeddingOptim("adagrad", lr=0.1), tt_min_rows=100)
    assert ebc.kept_dense() == {"t1": "40 rows, under tt_min_rows=100", "t2": "75 rows, under tt_min_rows=100"}
    step(ebc, kjt(cfgs, 6, seed=5))
    names = {n for n in ebc.fused_optimizer.state_dict()["state"]}
    assert {"collections.0.dense.1", "collections.0.dense.2"} <= names


@pytest.mark.parametrize("system", ["ecorec", "elrec", "ttrec", "dense-torch", "qr", "hash"])
def test_to_moves_every_tensor_of_state(system):
    cfgs = configs()
    ebc = build(system, cfgs, optimizer=EmbeddingOptim("adagrad", lr=0.1))
    step(ebc, kjt(cfgs, 4, seed=6))
    ebc.to(torch.float64)
    floats = [t for t in state_tensors(ebc) if t.is_floating_point()]
    assert floats and all(t.dtype == torch.float64 for t in floats), {t.dtype for t in floats}
    assert all(s.dtype == torch.float64 for st in ebc.fused_optimizer.state.values() for k, s in st.items()
               if k != "step")


def state_tensors(module) -> list[torch.Tensor]:
    """Every tensor a module holds: parameters, buffers, and plain attributes (in lists and dicts) of every
    submodule."""
    out = list(module.parameters()) + list(module.buffers())
    internal = set(vars(torch.nn.Module()))

    def walk(v):
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, torch.optim.Optimizer):
            for st in v.state.values():
                out.extend(x for k, x in st.items() if isinstance(x, torch.Tensor) and k != "step")

    for m in module.modules():
        for k, v in vars(m).items():
            if k not in internal:
                walk(v)
    return out


def test_deepcopy_and_state_dict_behave_as_a_modules():
    cfgs = configs()
    a = build("ecorec", cfgs, optimizer=EmbeddingOptim("adagrad", lr=0.1))
    step(a, kjt(cfgs, 4, seed=7))
    b = copy.deepcopy(a)
    assert not list(in_backward_optimizer_filter(b.named_parameters()))  # still marked as updated in backward
    c = build("ecorec", cfgs, optimizer=EmbeddingOptim("adagrad", lr=0.1), seed=9)
    c.load_state_dict(a.state_dict())
    x = kjt(cfgs, 4, seed=8)
    for m in (a, b, c):
        step(m, x, 1)
    for t in cfgs:
        torch.testing.assert_close(b.materialize(t.name), a.materialize(t.name), atol=0, rtol=0)
        torch.testing.assert_close(c.materialize(t.name), a.materialize(t.name), atol=0, rtol=0)


def test_inference_under_no_grad_updates_nothing():
    cfgs = configs()
    ebc = build("ecorec", cfgs)
    before = [p.detach().clone() for p in ebc.parameters()]
    with torch.no_grad():
        F.relu(ebc(kjt(cfgs, 4, seed=0)).values())
    assert all(torch.equal(p, q) for p, q in zip(before, ebc.parameters()))


def test_moving_a_collection_reaches_every_tensor_it_holds():
    """A conversion reaches every tensor of a TT-Rec with its hot-row cache (frequency table, cached ids, the
    accumulated gradient) and of EL-Rec's host pipeline: each is replaced by the converted one."""
    cfgs = configs()
    for system, options in (("ttrec", {"cache_rows": 8, "cache_populate_every": 1}), ("elrec", {"host_pipeline": True})):
        ebc = build(system, cfgs, optimizer=EmbeddingOptim("adagrad", lr=0.1), **options)
        for i in range(2):
            step(ebc, kjt(cfgs, 4, seed=i))
        params = {id(p) for p in ebc.parameters()}  # nn.Module converts a parameter in place (its .data)
        before = [t for t in state_tensors(ebc) + frequency_tables(ebc) if id(t) not in params]  # kept alive
        ebc._apply(lambda t: t.clone())
        after = {id(t) for t in state_tensors(ebc) + frequency_tables(ebc)}
        assert before and not {id(t) for t in before} & after, system


def frequency_tables(module) -> list[torch.Tensor]:
    return [t for m in module.modules() for f in [getattr(m, "freq", None)] if f is not None
            for t in (f.keys, f.counts)]
