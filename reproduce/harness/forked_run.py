"""A run's processes forked from the launcher's fork server, which has imported torch once (fork_server.py),
instead of fresh interpreters that each import it again (seconds a process, and torchrun's own start over ranks: on a
small machine more than a 1-rank run's timed steps). Every run still gets a process of its own that has run nothing before
it: a fork of the server, which only imported modules and never ran an op or started a thread.

What a fresh interpreter would have and a fork does not is handed over (fork_server.prepare_child): a session and
process group of its own (the launcher stops the whole group on a time limit), the caller's environment as it is now
(the server keeps the one it started with: only what torch reads at its import is the server's), the caller's working
folder, the cores it may run on (and that many threads: OpenMP counted the server's cores when torch was imported),
its output into the run's log. Over ranks of one node, ``start_ranks`` sets torchrun's variables (RANK, WORLD_SIZE,
MASTER_ADDR, ...) and ``RankWatch`` does what torchrun does on a failure: it names the rank that failed first and
stops the others."""
from __future__ import annotations

import os
import select
import signal
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from reproduce.harness.environment import LAUNCH_ENV
from reproduce.harness.torchrun import GRACE_S  # how long the others get to end on SIGTERM, as under torchrun


@dataclass
class Forked:
    """A process the server forked: its pid (its process group's) and its status pipe (``sentinel``: readable when it
    ended), with the small part of multiprocessing.Process's interface the launcher uses."""

    pid: int
    sentinel: int
    said: dict[str, str] = field(default_factory=dict)  # what its status pipe said (fork_server.py)
    exitcode: int | None = None
    ended_at: float | None = None  # its own clock when its run returned (None: it ended abruptly, or well)

    def poll(self) -> int | None:
        if self.exitcode is None and select.select([self.sentinel], [], [], 0)[0]:
            self._read()
        return self.exitcode

    def join(self, timeout: float | None = None) -> None:
        if self.exitcode is None and select.select([self.sentinel], [], [], timeout)[0]:
            self._read()

    def _read(self) -> None:
        from reproduce.harness.fork_server import read_status

        self.said.update(read_status(self.sentinel, "exit"))  # "end" comes moments before "exit"
        os.close(self.sentinel)
        self.exitcode = int(self.said["exit"]) if "exit" in self.said else -signal.SIGKILL  # the server was killed
        self.ended_at = float(self.said["end"]) if "end" in self.said else None


def start(module: str, args: Sequence[str], env: dict[str, str], log: Path, cores: tuple[int, ...] | None = None
          ) -> Forked:
    """Start ``module``'s ``main(args)`` in a process forked from the server, its output appended to ``log`` (which
    exists)."""
    from reproduce.harness.fork_server import Server

    req = {"module": module, "args": list(args), "env": {**env, LAUNCH_ENV: "fork"}, "cwd": os.getcwd(),
           "cores": sorted(cores) if cores else None}
    return Forked(*Server.get().fork(req, log))


def stop(procs: Sequence, grace_s: float = GRACE_S) -> list[int]:
    """SIGTERM to each process's group, SIGKILL to whatever is left after ``grace_s``, and reap them; the indices of
    those that had to be killed."""
    _signal(procs, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
    killed = [i for i, p in enumerate(procs) if p.poll() is None]
    _signal(procs, signal.SIGKILL)
    for p in procs:
        p.join()
    return killed


def _signal(procs: Sequence, sig: int) -> None:
    for p in procs:
        if p.poll() is not None:
            continue
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:  # not yet in its own group (setsid is its first step), or gone
            try:
                os.kill(p.pid, sig)
            except ProcessLookupError:
                pass


def free_port() -> int:
    """A TCP port free on this host now, for rank 0's store (MASTER_PORT)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_env(rank: int, world: int, port: int) -> dict[str, str]:
    """The variables torchrun gives a rank of a one-node run (what rank.py and env:// rendezvous read)."""
    return {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_WORLD_SIZE": str(world),
            "GROUP_RANK": "0", "GROUP_WORLD_SIZE": "1", "ROLE_RANK": str(rank), "ROLE_WORLD_SIZE": str(world),
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}


def start_ranks(module: str, args: Sequence[str], env: dict[str, str], log: Path, world: int,
                cores: tuple[int, ...] | None = None) -> list[Forked]:
    """The ``world`` ranks of a one-node run, each a process forked from the server."""
    port = free_port()
    return [start(module, args, {**env, **rank_env(r, world, port)}, log, cores) for r in range(world)]


SETTLE_S = 1.0  # after a rank's failure, how long its peers' ends are gathered before the root cause is named


@dataclass
class RankWatch:
    """Watches a run's processes as torchrun's agent does: when one fails, the root cause is named and the others are
    stopped. The failures seen within SETTLE_S of the first are weighed together (the server reports ends in the
    order it reaps them): a rank that ended abruptly - killed by a signal (the launcher has sent none yet), or gone
    by os._exit - failed of itself, while a run that returned an error may be the aftermath of a peer's death (gloo:
    "Connection reset by peer"); else the rank whose run returned first by its own clock."""

    procs: list[Forked]
    log: Path | None = None  # what the watch did goes there too, stamped, as torchrun's agent writes its own
    first_failure: tuple[int, int] | None = None  # (rank, its exit code: negative for a signal)
    _ended: set = field(default_factory=set)
    _failed: list = field(default_factory=list)  # (rank, exit code, its end by its clock) in the order seen
    _settle_until: float | None = None

    def note(self, text: str) -> None:
        if self.log is not None:
            now = time.time()  # one reading for the seconds and their milliseconds
            with open(self.log, "a") as f:
                f.write(f"[launcher {time.strftime('%H:%M:%S', time.localtime(now))}.{int(now * 1000) % 1000:03d}] "
                        f"{text}\n")

    def stop(self, why: str) -> None:
        """Stop every process not ended yet, saying why and which had to be killed."""
        left = [i for i in range(len(self.procs)) if i not in self._ended]
        if not left:
            return
        self.note(f"{why}: SIGTERM to {_names(left, self.procs)}, SIGKILL to those left after {GRACE_S:g} s")
        killed = stop([self.procs[i] for i in left])
        if killed:
            self.note(f"SIGKILL to {_names([left[k] for k in killed], self.procs)} (still running after "
                      f"{GRACE_S:g} s)")
        self._ended.update(left)

    def wait(self, timeout_s: float | None, poll: Callable[[], None] | None = None, poll_s: float = 0.25) -> int | None:
        """The run's exit code once every process ended (the only process's own; over ranks 0, or 1 when one
        failed), or None when it ran past ``timeout_s`` (every process stopped). Stops them all when this process is
        interrupted. ``poll`` is called every ``poll_s`` meanwhile."""
        from multiprocessing.connection import wait as wait_any

        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        try:
            while len(self._ended) < len(self.procs):
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    self.stop(f"time limit of {timeout_s:g} s")
                    return None
                waits = [poll_s if poll is not None else None, None if deadline is None else deadline - now,
                         None if self._settle_until is None else max(0.0, self._settle_until - now)]
                waits = [w for w in waits if w is not None]
                wait_any([p.sentinel for i, p in enumerate(self.procs) if i not in self._ended],
                         timeout=min(waits) if waits else None)
                self._reap()
                if self._settle_until is not None and (time.monotonic() >= self._settle_until
                                                       or len(self._ended) == len(self.procs)):
                    self._name_root_cause()
                if poll is not None:
                    poll()
        except BaseException:
            self.stop("the launcher was interrupted")
            raise
        if self._failed and self.first_failure is None:
            self._name_root_cause()
        if len(self.procs) == 1:
            return self.procs[0].exitcode
        return 0 if self.first_failure is None else 1

    def _reap(self) -> None:
        for i, p in enumerate(self.procs):
            if i in self._ended or p.poll() is None:
                continue
            p.join()
            self._ended.add(i)
            if p.exitcode != 0 and self.first_failure is None:
                self._failed.append((i, p.exitcode, p.ended_at))
        if self._failed and self._settle_until is None and self.first_failure is None:
            self._settle_until = time.monotonic() + (SETTLE_S if len(self.procs) > 1 else 0.0)

    def _name_root_cause(self) -> None:
        abrupt = [f[:2] for f in self._failed if f[2] is None]
        self.first_failure = abrupt[0] if abrupt else min(self._failed, key=lambda f: f[2])[:2]
        self._settle_until = None
        rank, code = self.first_failure
        self.stop(f"rank {rank} failed first (exit code {code})")


def _names(indices: list[int], procs: Sequence) -> str:
    return ", ".join(f"rank {i} (pid {procs[i].pid})" for i in indices) if len(procs) > 1 else f"pid {procs[0].pid}"
