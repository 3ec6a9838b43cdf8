"""A collection's optimizer state inside its ``state_dict`` (nn.Module's extra state): what a resumed run needs
besides the weights. Saved as the tensors themselves; loaded by copying into the tensors the build allocated, so a
kernel that holds them keeps them."""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor


@torch.no_grad()
def copy_state(into: Any, saved: Any, where: str) -> Any:
    """Copy ``saved`` (tensors, None, numbers, in dicts and lists) into ``into`` of the same structure, in place
    where ``into`` is a tensor; the structure loaded (a tensor's place keeps ``into``'s tensor). ValueError naming
    the entry whose kind or shape differs."""
    if isinstance(into, Tensor):
        if not isinstance(saved, Tensor) or saved.shape != into.shape:
            got = tuple(saved.shape) if isinstance(saved, Tensor) else type(saved).__name__
            raise ValueError(f"optimizer state {where}: the model holds shape {tuple(into.shape)}, the saved state "
                             f"{got}")
        into.copy_(saved)
        return into
    if isinstance(into, dict):
        if not isinstance(saved, dict) or set(saved) != set(into):
            raise ValueError(f"optimizer state {where}: the saved entries {sorted(saved) if isinstance(saved, dict) else saved!r} "
                             f"are not the model's {sorted(into)}")
        for k in into:
            into[k] = copy_state(into[k], saved[k], f"{where}.{k}")
        return into
    if isinstance(into, list):
        if not isinstance(saved, list) or len(saved) != len(into):
            raise ValueError(f"optimizer state {where}: {len(into)} entries in the model, not as saved")
        for k in range(len(into)):
            into[k] = copy_state(into[k], saved[k], f"{where}[{k}]")
        return into
    if into is None and saved is not None or into is not None and saved is None:
        raise ValueError(f"optimizer state {where}: the model holds {into!r}, the saved state {type(saved).__name__} "
                         f"(another optimizer?)")
    return saved


def move_state(module: Any, fn: Any, stop: type) -> None:
    """Apply ``fn`` (what ``nn.Module._apply`` maps over parameters and buffers: ``.to``, ``.double``, ``.cuda``) to
    the tensors a module holds outside its parameters and buffers: plain attributes of it and of its submodules
    (tensors, and tensors in lists, tuples and dicts: gradient buffers, optimizer state, index tables), and the
    state of a torch optimizer it holds (its step counts excepted, which torch keeps where they are). A plain object
    that holds tensors of its own (TT-Rec's frequency table) says so with an ``apply_state(fn)`` method, which is
    called. A submodule of type ``stop`` (a nested collection) moves its own. A pinned tensor (host memory on
    purpose: EL-Rec's host tables) stays where it is."""
    internal = set(vars(torch.nn.Module()))  # nn.Module's own bookkeeping (parameters, buffers, hooks)

    def walk(mod: Any) -> None:
        for key, value in list(vars(mod).items()):
            if key not in internal:
                vars(mod)[key] = convert(value)
        for child in mod.children():
            if not isinstance(child, stop):
                walk(child)

    def convert(value: Any) -> Any:  # containers are changed in place: whoever else holds one sees the moved tensors
        if isinstance(value, Tensor):
            return value if value.is_pinned() else fn(value)
        if isinstance(value, list):
            value[:] = [convert(v) for v in value]
        elif isinstance(value, dict):
            for k in list(value):
                value[k] = convert(value[k])
        elif isinstance(value, tuple) and not hasattr(value, "_fields"):
            moved = tuple(convert(v) for v in value)
            return value if all(a is b for a, b in zip(moved, value)) else moved
        elif callable(getattr(value, "apply_state", None)) and not isinstance(value, type):
            value.apply_state(fn)
        elif isinstance(value, torch.optim.Optimizer):
            for st in value.state.values():
                for k, v in st.items():
                    if isinstance(v, Tensor) and k != "step":
                        st[k] = fn(v)
        return value

    walk(module)
