"""What the SystemEBC tests share: every system that runs on one device, built on small tables under the options
that give it its own structure (reproduce/conformance/cases.py), and random KJT batches of given features."""
from __future__ import annotations

import pytest
import torch

torchrec = pytest.importorskip("torchrec")
from torchrec import KeyedJaggedTensor  # noqa: E402
from torchrec.modules.embedding_configs import EmbeddingBagConfig, PoolingType  # noqa: E402

from impls.api import get_impl, registered_names  # noqa: E402
from impls.ebc.module import SystemEBC  # noqa: E402
from reproduce.conformance.cases import structure_options  # noqa: E402


def single_device_systems() -> list[str]:
    out = []
    for name in registered_names():
        try:
            cls = get_impl(name)
        except ImportError:
            continue
        if not cls.distributed_only:
            out.append(name)
    return out


SYSTEMS = single_device_systems()


def configs(shared: bool = False, mean: bool = True) -> list:
    """Three tables of one dim (DLRM's dot interaction needs one); with ``shared`` the second serves two features."""
    return [EmbeddingBagConfig(name="t0", embedding_dim=8, num_embeddings=120, feature_names=["f0"]),
            EmbeddingBagConfig(name="t1", embedding_dim=8, num_embeddings=40,
                               feature_names=["f1", "f3"] if shared else ["f1"],
                               pooling=PoolingType.MEAN if mean else PoolingType.SUM),
            EmbeddingBagConfig(name="t2", embedding_dim=8, num_embeddings=75, feature_names=["f2"])]


def build(system: str, cfgs, optimizer=(torch.optim.SGD, {"lr": 0.05}), **kwargs) -> SystemEBC:
    return SystemEBC(cfgs, system, optimizer, **{**structure_options(get_impl(system)), **kwargs})


def kjt(cfgs, batch_size: int, seed: int, weighted: bool = False, max_bag: int = 4) -> KeyedJaggedTensor:
    """A batch of every feature of ``cfgs`` (keys in reverse order: the module must find its own), empty bags and
    duplicates included."""
    g = torch.Generator().manual_seed(seed)
    rows = {f: c.num_embeddings for c in cfgs for f in c.feature_names}
    keys = sorted(rows, reverse=True)
    lengths = torch.randint(0, max_bag + 1, (len(keys) * batch_size,), generator=g)
    lengths[0] = 0
    values = torch.cat([torch.randint(0, rows[k], (int(lengths[i * batch_size:(i + 1) * batch_size].sum()),),
                                      generator=g) for i, k in enumerate(keys)])
    weights = torch.rand(values.numel(), generator=g) + 0.5 if weighted else None
    return KeyedJaggedTensor(keys=keys, values=values, lengths=lengths, weights=weights)
