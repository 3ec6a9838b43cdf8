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

from reproduce.harness.fork_server import PRELOAD

START_METHOD = "forkserver"


def _with_environment(rank: int, environment: dict[str, str], fn: Callable, *args: Any) -> None:
    os.environ.clear()
    os.environ.update(environment)
    fn(rank, *args)


def forkserver():
    """The multiprocessing context of the fork server (started on its first use, with fork_server.PRELOAD imported);
    the standard library's, so the caller need not import torch. (A sweep's runs come from fork_server.py's server
    instead: multiprocessing's children import the caller's ``__main__``.)"""
    import multiprocessing as mp

    mp.set_forkserver_preload(PRELOAD)
    return mp.get_context(START_METHOD)


def start_ranks(fn: Callable, args: tuple, nprocs: int, join: bool = True):
    """``fn(rank, *args)`` in ``nprocs`` processes (``fn`` a module-level function, ``args`` picklable), as
    torch.multiprocessing.start_processes: with ``join`` it returns when all ended and raises when one failed; else
    the context to join."""
    import torch.multiprocessing as mp

    forkserver()
    return mp.start_processes(_with_environment, args=(dict(os.environ), fn, *args), nprocs=nprocs, join=join,
                              start_method=START_METHOD)


def rank_queue():
    """A queue the ranks of ``start_ranks`` can put their results or errors on."""
    return forkserver().SimpleQueue()
