"""How a check compares and what it concludes: a float64 expectation with a tolerance that follows its scale, and the
two ways a check ends other than passing (it fails with a reason, or it does not apply and says why)."""
from __future__ import annotations

import torch
from torch import Tensor


class Failed(Exception):
    """A check's failure, with its reason."""


class NotApplicable(Exception):
    """A check that does not apply to the system, with why."""


def close(got: Tensor, want: Tensor, what: str, rtol: float = 1e-5, atol: float | None = None) -> None:
    """``got`` (any dtype) within tolerance of the float64 ``want``; the absolute tolerance follows ``want``'s scale:
    a TT row is a sum of products that cancel, so an entry near zero carries the rounding of the largest terms."""
    want = want.detach().double()
    got = got.detach().double()
    if got.shape != want.shape:
        raise Failed(f"{what}: shape {tuple(got.shape)}, expected {tuple(want.shape)}")
    scale = float(want.abs().max()) if want.numel() else 0.0
    atol = max(1e-6, 1e-5 * scale) if atol is None else atol
    if not torch.allclose(got, want, rtol=rtol, atol=atol):
        err = (got - want).abs()
        at = tuple(int(i) for i in torch.nonzero(err == err.max())[0])
        raise Failed(f"{what}: max |error| {float(err.max()):.3g} at {at} (got {float(got[at]):.6g}, expected "
                     f"{float(want[at]):.6g}; tolerance {atol:.3g} + {rtol:g} x |expected|)")
