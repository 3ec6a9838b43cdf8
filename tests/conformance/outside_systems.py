"""What the outside-system tests write into a folder outside the checkout: examples/template.py (a correct system, the
plainest one) followed by four deliberately broken variants of it, each wrong in one way that check-system must name;
and examples/robe.py (every table in one shared array) with two planted bugs."""
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TEMPLATE = EXAMPLES / "template.py"


def forget_loaded_since(before: set[str]) -> None:
    """Forget the outside systems loaded since ``before`` (the names loaded then): the registry is the process's. Our
    own systems registered meanwhile (lazily, on first use) stay."""
    from impls import registry
    from reproduce.harness import systems

    for name in set(systems._loaded) - before:
        registry._REGISTRY.pop(name, None)
        systems._loaded.pop(name, None)


def wrong_gradient(cls: str, base: str, name: str) -> str:
    """The source of a subclass of ``base`` whose forward gives the right value with twice the gradient."""
    return f'''

class {cls}({base}):
    name = "{name}"

    def forward(self, features):
        out = super().forward(features)
        return 2 * out - out.detach()  # the right value, twice the gradient
'''


BROKEN_SOURCE = "\n\nimport dataclasses\n" + wrong_gradient("WrongGradient", "Template", "wrong-gradient") + '''

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


ROBE_PLANTED = wrong_gradient("RobeWrongGradient", "RobeEmbedding", "robe-wrong-gradient") + '''

class RobeStaleAdagrad(RobeEmbedding):
    name = "robe-stale-adagrad"

    @torch.no_grad()
    def optimizer_step(self):
        kept = [None if s is None else s.clone() for s in self._state]
        super().optimizer_step()  # steps with this step's sums, then forgets them
        for s, was in zip(self._state, kept):
            if s is not None:
                s.copy_(was)
'''


def robe_source() -> str:
    """examples/robe.py with its planted bugs, for a file outside the checkout."""
    return (EXAMPLES / "robe.py").read_text() + ROBE_PLANTED
