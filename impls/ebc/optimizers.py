"""The embedding optimizer of a TorchRec-style module, declared per table and applied inside backward (TorchRec's
convention for fused embedding optimizers): what a declaration may be (``embedding_optims``), and the
KeyedOptimizer-style view of the module's optimizer state (``fused_optimizer``) whose ``step`` has nothing to do."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from torch import Tensor, nn

from impls.api import EmbeddingOptim

# the optimizer classes a declaration may name (torch's, or torchrec's placeholders of the same names), with the
# arguments each takes here and the value the others must keep: the systems implement plain SGD and exact Adagrad
_TAKES = {"SGD": {"lr"}, "Adagrad": {"lr", "eps", "initial_accumulator_value"}}
_NEUTRAL = {"momentum": 0, "dampening": 0, "weight_decay": 0, "nesterov": False, "lr_decay": 0, "maximize": False,
            "foreach": None, "differentiable": False, "fused": None}


def embedding_optim(declared: Any, table: str) -> EmbeddingOptim:
    """One table's declared optimizer: an EmbeddingOptim, or (optimizer class, kwargs) as TorchRec's
    ``apply_optimizer_in_backward`` takes it (torch.optim / torchrec.optim SGD or Adagrad)."""
    if isinstance(declared, EmbeddingOptim):
        return declared
    if not (isinstance(declared, tuple) and len(declared) == 2 and isinstance(declared[0], type)
            and isinstance(declared[1], Mapping)):
        raise TypeError(f"table {table!r}: an optimizer is an EmbeddingOptim or (optimizer class, kwargs), got "
                        f"{declared!r}")
    cls, kwargs = declared
    kind = cls.__name__
    if kind not in _TAKES or not cls.__module__.split(".")[0] in ("torch", "torchrec"):
        raise ValueError(f"table {table!r}: {cls.__module__}.{kind} is not an embedding optimizer of these systems; "
                         f"they implement SGD and exact Adagrad (torch.optim.SGD / torch.optim.Adagrad)")
    for key, value in kwargs.items():
        if key not in _TAKES[kind] and _NEUTRAL.get(key, object()) != value:
            raise ValueError(f"table {table!r}: {kind}({key}={value!r}) is not implemented by these systems' fused "
                             f"update; it takes {sorted(_TAKES[kind])}")
    if "lr" not in kwargs:
        raise ValueError(f"table {table!r}: {kind} needs lr")
    return EmbeddingOptim("sgd" if kind == "SGD" else "adagrad", lr=float(kwargs["lr"]),
                          eps=float(kwargs.get("eps", 1e-10 if kind == "Adagrad" else 1e-8)),
                          initial_accumulator=float(kwargs.get("initial_accumulator_value", 0.0)))


def embedding_optims(optimizer: Any, tables: Sequence[str]) -> dict[str, EmbeddingOptim]:
    """Every table's optimizer from one declaration for all, or a {table: declaration} naming each table."""
    if isinstance(optimizer, Mapping):
        unknown = sorted(set(optimizer) - set(tables))
        missing = [t for t in tables if t not in optimizer]
        if unknown or missing:
            raise ValueError(f"the optimizer mapping must name every table once: unknown {unknown}, missing {missing}")
        return {t: embedding_optim(optimizer[t], t) for t in tables}
    return {t: embedding_optim(optimizer, t) for t in tables}


def fused_optimizer(params: Mapping[str, nn.Parameter], state: Mapping[nn.Parameter, dict[str, Tensor]],
                    optims: Mapping[str, tuple[EmbeddingOptim, list[nn.Parameter]]]):
    """A torchrec FusedOptimizer (a KeyedOptimizer whose step and zero_grad do nothing: the update ran in backward)
    over ``params`` (name -> parameter), their ``state`` (the tensors the update reads and writes) and one param group
    per declared optimizer (``optims``: label -> (optimizer, its parameters))."""
    from torchrec.optim.fused import FusedOptimizer

    class EmbeddingFusedOptimizer(FusedOptimizer):
        """The embedding update's state; it is applied inside backward, so step and zero_grad do nothing."""

        def step(self, closure: Any = None) -> None:
            return None

        def zero_grad(self, set_to_none: bool = False) -> None:
            return None

    groups = [{"params": ps, "optimizer": o.kind, "lr": o.lr, "eps": o.eps,
               "initial_accumulator_value": o.initial_accumulator, "tables": label}
              for label, (o, ps) in optims.items()]
    return EmbeddingFusedOptimizer(dict(params), {p: s for p, s in state.items() if s}, groups)
