"""What the outside-system tests write into a folder outside the checkout: examples/template.py (a correct system, the
plainest one) followed by four deliberately broken variants of it, each wrong in one way that check-system must name."""
from pathlib import Path

TEMPLATE = Path(__file__).resolve().parents[2] / "examples" / "template.py"

BROKEN_SOURCE = '''

import dataclasses


class WrongGradient(Template):
    name = "wrong-gradient"

    def forward(self, features):
        out = super().forward(features)
        return 2 * out - out.detach()  # the right value, twice the gradient


class IgnoresLearningRate(Template):
    name = "ignores-lr"

    def optimizer_step(self):
        self.optim = dataclasses.replace(self.optim, lr=1.0)
        super().optimizer_step()


class OffByOne(Template):
    name = "off-by-one"

    def forward(self, features):
        features = self.checked(features)
        ids = torch.cat([(v + 1) % t.num_embeddings for t, (v, _) in zip(self.tables, features.tables())])
        return super().forward(SparseFeatures(ids, features.offsets, features.batch_size))


class NonDeterministic(Template):
    name = "non-deterministic"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        with torch.no_grad():
            for p in self.params:
                p.uniform_(-0.1, 0.1)  # the global generator: another table every build
'''
BROKEN = {"WrongGradient": "gradient", "IgnoresLearningRate": "sgd", "OffByOne": "forward",
          "NonDeterministic": "deterministic"}


def source() -> str:
    """The file the tests write outside the checkout."""
    return TEMPLATE.read_text() + BROKEN_SOURCE
