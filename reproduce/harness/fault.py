"""Fault injection for the harness's own tests: ``DLRMBENCH_FAULT=R:I[:KIND[:IMPL]]`` makes rank R (0 for a
single process) fail at step I, only in points of implementation IMPL when one is named. KIND is ``exit`` (the
default: exit code 3 with no cleanup and no message to peers, a crash), ``kill`` (SIGKILL to itself, what the
kernel's OOM killer does), ``hang`` (sleep until the launcher's time limit) or ``stop`` (SIGSTOP to itself: a
frozen process that answers no signal but SIGKILL)."""
from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass

FAULT_ENV = "DLRMBENCH_FAULT"
KINDS = ("exit", "kill", "hang", "stop")


@dataclass(frozen=True)
class Fault:
    rank: int
    step: int
    kind: str = "exit"
    impl: str = ""

    @staticmethod
    def parse(text: str) -> "Fault":
        parts = text.split(":")
        try:
            if not 2 <= len(parts) <= 4:
                raise ValueError
            fault = Fault(int(parts[0]), int(parts[1]), *(p for p in parts[2:]))
        except ValueError:
            raise ValueError(f"{FAULT_ENV}={text!r} is not RANK:STEP[:KIND[:IMPL]]") from None
        if fault.kind not in KINDS:
            raise ValueError(f"{FAULT_ENV}: kind {fault.kind!r} is not one of {KINDS}")
        return fault

    @staticmethod
    def from_env(impl: str) -> "Fault | None":
        text = os.environ.get(FAULT_ENV)
        if not text:
            return None
        fault = Fault.parse(text)
        return fault if fault.impl in ("", impl) else None

    def at_step(self, rank: int, step: int) -> None:
        if (rank, step) != (self.rank, self.step):
            return
        if self.kind == "exit":
            os._exit(3)
        if self.kind == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if self.kind == "stop":
            os.kill(os.getpid(), signal.SIGSTOP)
        while True:  # hang
            time.sleep(60)
