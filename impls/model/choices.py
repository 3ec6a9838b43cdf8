"""The model's choices by name, without torch: what a point and the command line may name, checked before any model
code is imported."""
from __future__ import annotations

MODES = ("dlrm", "embedding-only")  # the whole model, or its embeddings alone
INTERACTIONS = ("dot", "dcnv2")
# the optimizer of the MLPs by name -> its torch.optim class (train.py builds it)
MLP_OPTIMIZER_CLASSES = {"sgd": "SGD", "adagrad": "Adagrad", "adam": "Adam"}
MLP_OPTIMIZERS = tuple(MLP_OPTIMIZER_CLASSES)
