"""A collection's state_dict holds what a resumed run needs (impls/state.py): its weights and its optimizer state
(Adagrad's sums, TT-Rec's hot-row cache). Three steps, save, load into a fresh build, three more steps: the tables
equal those of the run that never stopped, bit for bit; loading the weights alone does not (the control)."""
from __future__ import annotations

import io

import pytest
import torch

from impls.api import EmbeddingOptim, SparseFeatures, TableSpec, get_impl

TABLES = [TableSpec("a", 2000, 16), TableSpec("b", 50, 16)]
SYSTEMS = [("dense-torch", {}), ("ecorec", {"tt_min_rows": 100}), ("elrec", {"tt_min_rows": 100}),
           ("ttrec", {"tt_min_rows": 100, "cache_rows": 50, "cache_populate_every": 2}), ("md", {}), ("qr", {}),
           ("dense-fbgemm", {}), ("hash", {"budget": 0.5})]


def _features(seed: int, B: int = 32) -> SparseFeatures:
    g = torch.Generator().manual_seed(seed)
    values = torch.cat([torch.randint(0, 2000, (B,), generator=g), torch.randint(0, 50, (B,), generator=g)])
    return SparseFeatures(values, torch.arange(2 * B + 1), B)


def _step(emb, seed: int) -> None:
    out = emb(_features(seed))
    (out * torch.randn(out.shape, generator=torch.Generator().manual_seed(seed))).sum().backward()
    emb.optimizer_step()


def _saved(emb) -> dict:
    buf = io.BytesIO()
    torch.save(emb.state_dict(), buf)
    buf.seek(0)
    return torch.load(buf, weights_only=True)  # what a kept model loads with


@pytest.mark.parametrize("name,options", SYSTEMS, ids=[s for s, _ in SYSTEMS])
@pytest.mark.parametrize("kind", ["adagrad", "sgd"])
def test_a_collection_resumes_from_its_state_dict_bit_for_bit(name, options, kind):
    if name in ("dense-fbgemm", "hash"):
        pytest.importorskip("fbgemm_gpu")

    def build():
        return get_impl(name)(TABLES, EmbeddingOptim(kind, lr=0.1), device=torch.device("cpu"), seed=0, **options)

    whole, resumed = build(), build()
    for s in range(3):
        _step(whole, s)
    state = _saved(whole)
    resumed.load_state_dict(state)
    for s in range(3, 6):
        _step(whole, s)
        _step(resumed, s)
    for t in TABLES:
        assert torch.equal(whole.materialize(t.name), resumed.materialize(t.name)), t.name
    if kind == "adagrad" and "_extra_state" in state:  # the control: the weights alone go on differently
        weights_only = build()
        weights_only.load_state_dict({k: v for k, v in state.items() if not k.endswith("_extra_state")},
                                     strict=False)
        for s in range(3, 6):
            _step(weights_only, s)
        assert not all(torch.equal(whole.materialize(t.name), weights_only.materialize(t.name)) for t in TABLES)


def test_a_saved_state_of_another_optimizer_is_refused_by_name():
    sgd = get_impl("ecorec")(TABLES, EmbeddingOptim("sgd", lr=0.1), device=torch.device("cpu"), tt_min_rows=100)
    ada = get_impl("ecorec")(TABLES, EmbeddingOptim("adagrad", lr=0.1), device=torch.device("cpu"), tt_min_rows=100)
    with pytest.raises(ValueError, match="optimizer state ecorec"):
        ada.load_state_dict(_saved(sgd))
