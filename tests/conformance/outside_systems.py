"""What the outside-system tests write into a folder outside the checkout: a correct system of its own (a plain table
on the suite's CompressedCollection) and four deliberately broken variants of it, each wrong in one way that
check-system must name."""

SOURCE = '''
import dataclasses

import torch
import torch.nn.functional as F

from impls.api import table_seed
from impls.compress.base import CompressedCollection


class Plain(CompressedCollection):
    name = "plain-outside"

    def __init__(self, tables, optim, ctx=None, *, device="cpu", check_bounds=True, seed=0):
        super().__init__(tables, optim, ctx, check_bounds=check_bounds, seed=seed)
        for t in self.tables:
            self.add(self.initial(t, seed).to(device), True)

    def initial(self, t, seed):
        g = torch.Generator().manual_seed(table_seed(seed, t.name))
        return torch.rand(t.num_embeddings, t.dim, generator=g) - 0.5

    def lookup(self, i, ids, offsets, mode):
        return F.embedding_bag(ids, self.params[i], offsets, mode=mode, sparse=True, include_last_offset=True)

    def forward(self, features):
        features = self.checked(features)
        return torch.cat([self.lookup(i, v, o, t.pooling)
                          for i, (t, (v, o)) in enumerate(zip(self.tables, features.tables()))], 1)

    def table_parameters(self, table):
        return [self.params[self.table_index(table)].detach()]

    def materialize(self, table):
        return self.table_parameters(table)[0].clone()


class WrongGradient(Plain):
    name = "wrong-gradient"

    def lookup(self, i, ids, offsets, mode):
        out = super().lookup(i, ids, offsets, mode)
        return 2 * out - out.detach()  # the right value, twice the gradient


class IgnoresLearningRate(Plain):
    name = "ignores-lr"

    def optimizer_step(self):
        self.optim = dataclasses.replace(self.optim, lr=1.0)
        super().optimizer_step()


class OffByOne(Plain):
    name = "off-by-one"

    def lookup(self, i, ids, offsets, mode):
        return super().lookup(i, (ids + 1) % self.tables[i].num_embeddings, offsets, mode)


class NonDeterministic(Plain):
    name = "non-deterministic"

    def initial(self, t, seed):
        return torch.rand(t.num_embeddings, t.dim) - 0.5  # the global generator: another table every build
'''
BROKEN = {"WrongGradient": "gradient", "IgnoresLearningRate": "sgd", "OffByOne": "forward",
          "NonDeterministic": "deterministic"}
