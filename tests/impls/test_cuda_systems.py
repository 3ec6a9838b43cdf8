"""The TT systems on CUDA equal the same systems on the CPU, through the paths a small contract batch does not
take: TT-Rec over several occurrence chunks, EcoRec over several sorted-id micro-batches (scatter_add_rows),
EL-Rec with its host-memory pipeline (pinned host tables, rows staged on a side stream)."""
import pytest
import torch

from impls.api import EmbeddingOptim, SparseFeatures, TableSpec, get_impl

TABLES = [TableSpec("big", 200_000, 16), TableSpec("mid", 30_000, 16, pooling="mean"), TableSpec("small", 500, 16)]


def batch(B=512, seed=0):
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, 6, (len(TABLES) * B,), generator=gen)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])
    values = torch.cat([torch.randint(0, t.num_embeddings, (int(lengths[i * B:(i + 1) * B].sum()),), generator=gen)
                        for i, t in enumerate(TABLES)])
    return SparseFeatures(values, offsets, B)


def run(name, device, steps=3, **options):
    """Forward outputs of each step and the tables after them (SGD then Adagrad-style steps on one model)."""
    emb = get_impl(name)(TABLES, EmbeddingOptim("adagrad", lr=0.05, eps=1e-4), device=device, seed=3,
                         tt_min_rows=10_000, ranks=8, **options)
    outs = []
    for s in range(steps):
        sf = batch(seed=s)
        if hasattr(emb, "pipeline") and emb.pipeline is not None:
            emb.prefetch(batch(seed=s + 1).to(device))
        out = emb(sf.to(device))
        (out * torch.linspace(-1, 1, out.shape[1], device=device)).sum().backward()
        emb.optimizer_step()
        outs.append(out.detach().cpu())
    return outs, [emb.materialize(t.name).detach().cpu() for t in TABLES], emb


def assert_same(cpu, cuda):
    for a, b in zip(cpu[0] + cpu[1], cuda[0] + cuda[1]):
        scale = max(float(a.abs().max()), 1e-30)
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5 * scale)


@pytest.mark.gpu
def test_ttrec_several_chunks_on_cuda():
    per_table = [v.numel() for v, _ in batch(seed=0).tables()]
    assert min(per_table[:2]) > 300  # each TT table (big, mid) is looked up over several 300-lookup chunks
    cpu, cuda = run("ttrec", "cpu", chunk=300), run("ttrec", "cuda", chunk=300)
    assert_same(cpu, cuda)


@pytest.mark.gpu
def test_ecorec_several_micro_batches_on_cuda():
    cpu, cuda = run("ecorec", "cpu", micro_batches=4, min_chunk=1), run("ecorec", "cuda", micro_batches=4, min_chunk=1)
    assert cuda[2].work_report().extra["micro_batches"] >= 2 * 4  # two TT tables, four micro-batches each
    assert_same(cpu, cuda)


@pytest.mark.gpu
def test_elrec_host_pipeline_on_cuda():
    cpu = run("elrec", "cpu", host_pipeline=True)
    cuda = run("elrec", "cuda", host_pipeline=True)
    emb = cuda[2]
    assert emb.host and all(t.device.type == "cpu" and t.is_pinned() for t in emb.host.values())
    assert all(p.device.type == "cuda" for p in emb.parameters())  # only the cores are module parameters
    assert emb.work_report().extra["host_pipeline"]["prefetched"] >= 2
    assert_same(cpu, cuda)
