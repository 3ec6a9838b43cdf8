"""Graphs: an inference SystemEBC exports with torch.export (ids unchecked: check_bounds=False; the number of ids
dynamic) and the exported program scores other batches as the module does; torch.compile trains TorchRec's DLRM with
EcoRec tables to the same tables as eager (dynamo and AOTAutograd; its graph breaks are docs/library.md's)."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tests.ebc.cases import build, configs, kjt

# fbgemm-gpu-cpu 1.8.0 has no fake kernel for its TBE forward: dense-fbgemm and hash (fbgemm storage) do not export
EXPORTED = ["ecorec", "elrec", "ttrec", "dense-torch", "qr", "md"]


def export(ebc, example):
    nnz = torch.export.Dim("nnz", min=2)
    with torch.no_grad():  # KJT's pytree: values, weights, lengths, offsets, stride-per-rank, inverse indices
        return torch.export.export(ebc, (example,), dynamic_shapes={"features": [{0: nnz}, *[None] * 5]},
                                   strict=False)


@pytest.mark.parametrize("system", EXPORTED)
def test_export_round_trips_with_equal_outputs(system):
    cfgs = configs()
    ebc = build(system, cfgs, check_bounds=False).eval()
    program = export(ebc, kjt(cfgs, 4, seed=0))
    for seed in (1, 2):  # other batches, other numbers of ids
        batch = kjt(cfgs, 4, seed=seed)
        with torch.no_grad():
            got, want = program.module()(batch), ebc(batch)
        assert got.keys() == want.keys()
        torch.testing.assert_close(got.values(), want.values(), atol=0, rtol=0)


def test_export_refuses_what_a_graph_cannot_hold():
    cfgs = configs()
    with pytest.raises(ValueError, match="check_bounds=False"):
        export(build("ecorec", cfgs).eval(), kjt(cfgs, 4, seed=0))
    weighted = configs(mean=False)
    with pytest.raises(ValueError, match="weighted SystemEBC does not export"):
        export(build("ecorec", weighted, check_bounds=False, is_weighted=True).eval(),
               kjt(weighted, 4, seed=0, weighted=True))


def test_the_library_examples_run(tmp_path, monkeypatch, capsys):
    """docs/library.md's two examples, end to end, as scripts (run as __main__, in this process: a fresh interpreter's
    imports would be most of their time)."""
    import runpy
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    monkeypatch.chdir(tmp_path)
    for script in ("torchrec_dlrm.py", "plain_pytorch.py"):
        monkeypatch.setattr(sys, "argv", [script, "--steps", "8"])
        runpy.run_path(str(root / "examples" / script), run_name="__main__")
    out = capsys.readouterr().out
    assert "loaded model agrees: True" in out, out
    assert "scores a new batch as the trained model does: True" in out, out


@pytest.mark.slow
@pytest.mark.parametrize("system,options", [("ecorec", {"tt_min_rows": 100}), ("dense-torch", {})])
def test_compile_trains_as_eager(system, options):
    """EcoRec's fused update (in its backward node: the TT table of 120 rows) and the update queued to the end of
    backward (its plain tables under tt_min_rows, dense-torch's optimizer), under torch.compile."""
    from torchrec.models.dlrm import DLRM
    from torchrec.optim.optimizers import in_backward_optimizer_filter

    cfgs = configs()
    g = torch.Generator().manual_seed(0)
    data = [(torch.randn(4, 3, generator=g), kjt(cfgs, 4, seed=i), torch.rand(4, generator=g).round())
            for i in range(2)]
    tables = []
    for compiled in (False, True):
        torch.manual_seed(0)
        ebc = build(system, cfgs, check_bounds=False, **options)
        model = DLRM(embedding_bag_collection=ebc, dense_in_features=3, dense_arch_layer_sizes=[8, 8],
                     over_arch_layer_sizes=[8, 1])
        # aot_eager: dynamo's graphs and AOTAutograd's backward, without inductor's C++ codegen (30 s on 2 busy cores)
        run = torch.compile(model, backend="aot_eager") if compiled else model
        opt = torch.optim.SGD([p for _, p in in_backward_optimizer_filter(model.named_parameters())], lr=0.1)
        for dense, sparse, labels in data:
            loss = F.binary_cross_entropy_with_logits(run(dense, sparse).squeeze(1), labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
        tables.append(torch.cat([ebc.materialize(c.name).flatten() for c in cfgs]))
    torch.testing.assert_close(tables[1], tables[0], atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("system", ["ecorec", "dense-torch"])
def test_the_suites_own_collection_exports_over_sparse_features(system):
    """SparseFeatures is a pytree node: a collection of the suite exports with it as its input."""
    from impls.api import EmbeddingOptim, TableSpec, get_impl
    from reproduce.conformance.cases import random_batch, structure_options

    tables = [TableSpec("a", 60, 8), TableSpec("b", 30, 8, "mean")]
    cls = get_impl(system)
    emb = cls(tables, EmbeddingOptim(), check_bounds=False,
              **structure_options(cls)).eval()
    nnz = torch.export.Dim("nnz", min=2)
    with torch.no_grad():
        program = torch.export.export(emb, (random_batch(tables, 5, seed=0),),
                                      dynamic_shapes={"features": [{0: nnz}, None]}, strict=False)
        other = random_batch(tables, 5, seed=1)
        torch.testing.assert_close(program.module()(other), emb(other), atol=0, rtol=0)
