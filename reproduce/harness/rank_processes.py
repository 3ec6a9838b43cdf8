"""Ranks started as processes of this one (torch.multiprocessing), for the programs that run a function on a few gloo
ranks themselves: `check-system`'s two-rank check, `calibrate`'s collectives and engine steps, and the tests.

They start from a fork server (``forkserver``) that has imported torch once, rather than as fresh interpreters
(``spawn``) that each import it again: a rank then starts in milliseconds instead of the ~2.5 s torch's import takes,
and the server is a single-threaded process of its own, so no thread or lock of the caller is forked. What a fresh
interpreter would have and a fork of the server would not is handed over: the caller's working folder and sys.path
(multiprocessing does) and its environment as it is now (here: the server keeps the one it started with)."""
from __future__ import annotations

import os
from typing import Any, Callable

START_METHOD = "forkserver"
# imported once by the server (torch._dynamo too: torch.optim imports it on an optimizer's first use, ~2 s); project
# modules are imported by each rank, as it would fresh
PRELOAD = ["torch", "torch._dynamo"]


def _with_environment(rank: int, environment: dict[str, str], fn: Callable, *args: Any) -> None:
    os.environ.clear()
    os.environ.update(environment)
    fn(rank, *args)


def start_ranks(fn: Callable, args: tuple, nprocs: int, join: bool = True):
    """``fn(rank, *args)`` in ``nprocs`` processes (``fn`` a module-level function, ``args`` picklable), as
    torch.multiprocessing.start_processes: with ``join`` it returns when all ended and raises when one failed; else
    the context to join."""
    import torch.multiprocessing as mp

    mp.set_forkserver_preload(PRELOAD)
    return mp.start_processes(_with_environment, args=(dict(os.environ), fn, *args), nprocs=nprocs, join=join,
                              start_method=START_METHOD)


def rank_queue():
    """A queue the ranks of ``start_ranks`` can put their results or errors on."""
    import torch.multiprocessing as mp

    return mp.get_context(START_METHOD).SimpleQueue()
