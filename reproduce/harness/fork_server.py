"""The launcher's fork server: a process that imports torch once (PRELOAD) and then forks one child per run process
it is asked for (``prepare_child`` says what a child is given). ``python -m reproduce.harness.fork_server FD`` serves
requests on the socket FD, a socketpair end the launcher keeps the other end of (``Server``).

A request is one JSON message with two descriptors passed along (SCM_RIGHTS): the log the child writes to, and the
write end of a status pipe, on which lines ``TAG VALUE`` come: ``pid`` (the server, once it forked), ``end`` (the
child's clock when its run returned an exit code; a process that ended by os._exit - a run that ended well, see
worker.exit_now, or one that left abruptly - or by a signal writes none) and ``exit``, its exit code (negative: the
signal that ended it), once the server has reaped it; then the pipe closes. The launcher reads only its own pipe, so
runs started from several threads (a duet) never read each other's answers. The server ends when the launcher's end
of the socket closes (the launcher ended, even by kill -9), and every child with it (each dies with its parent:
lifeline.py). Nothing of the launcher's ``__main__`` is imported into a child (multiprocessing's fork server does: a
run's code fingerprint would list the command line's modules)."""
from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

MAX_MESSAGE = 1 << 20
# what a fork server imports once (here and rank_processes.py's; torch._dynamo too: torch.optim imports it on an
# optimizer's first use, ~2 s); project modules are imported by each process, as it would fresh
PRELOAD = ["torch", "torch._dynamo"]


def serve(sock: socket.socket) -> None:
    """Fork a child per request until the socket closes; report each child's pid and exit code on its status pipe."""
    children: dict[int, int] = {}  # pid -> its status pipe
    while True:
        ready, _, _ = select.select([sock], [], [], 0.02 if children else None)
        _reap(children)
        if not ready:
            continue
        msg, fds, _, _ = socket.recv_fds(sock, MAX_MESSAGE, 2)
        if not msg:  # the launcher closed its end
            return
        log_fd, status_fd = fds
        pid = os.fork()
        if pid == 0:
            sock.close()
            for fd in children.values():
                os.close(fd)
            code = 1
            try:
                code = _child(json.loads(msg), log_fd)
            finally:
                for stream in (sys.stdout, sys.stderr):
                    try:
                        stream.flush()
                    except (OSError, ValueError):
                        pass
                os.write(status_fd, f"end {time.time()!r}\n".encode())
                os._exit(code)
        os.close(log_fd)
        os.write(status_fd, f"pid {pid}\n".encode())
        children[pid] = status_fd


def _reap(children: dict[int, int]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        fd = children.pop(pid, None)
        if fd is not None:
            os.write(fd, f"exit {os.waitstatus_to_exitcode(status)}\n".encode())
            os.close(fd)


def _child(req: dict, log_fd: int) -> int:
    """In the forked child: become the run's process (forked_run.prepare_child), run the module's ``main`` and end as
    the worker ends (worker.exit_now)."""
    import importlib
    import traceback

    prepare_child(req, log_fd)
    try:
        from reproduce.harness.worker import exit_now

        exit_now(importlib.import_module(req["module"]).main(req["args"]))
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - the run's failure goes to its log; the exit code says it failed
        traceback.print_exc()
        return 1
    return 0


def prepare_child(req: dict, log_fd: int) -> None:
    """In a process just forked by the server (``serve``): become a fresh run's process - a session of its own,
    the launcher's environment, working folder and sys.path entry as they are now, the cores it may run on (and that
    many threads: OpenMP counted the server's cores when torch was imported), Ctrl-C as Python's default, its output
    into the run's log."""
    os.setsid()
    from reproduce.harness.lifeline import die_with_parent

    die_with_parent()  # the server; it ends when the launcher does
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if req["cores"]:
        import torch

        os.sched_setaffinity(0, req["cores"])
        torch.set_num_threads(len(req["cores"]))
    os.environ.clear()
    os.environ.update(req["env"])
    os.chdir(req["cwd"])
    sys.path[0] = req["cwd"]  # `python -m`'s first entry: the folder it was started in
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)


class Server:
    """The launcher's handle on its fork server (one per launcher process, started on first use)."""

    _lock = threading.Lock()
    _running: "Server | None" = None

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # no parent-death signal: the kernel sends it when the thread that started the server ends (a duet's run
        # starts from a pool thread); the server ends when this end of the socket closes instead
        self.proc = subprocess.Popen([sys.executable, "-m", "reproduce.harness.fork_server", str(theirs.fileno())],
                                     pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL)
        theirs.close()
        self.sock = ours
        self.send_lock = threading.Lock()

    @classmethod
    def get(cls) -> "Server":
        with cls._lock:
            if cls._running is None or cls._running.proc.poll() is not None:
                cls._running = cls()
            return cls._running

    def fork(self, request: dict, log: Path) -> tuple[int, int, dict[str, str]]:
        """Ask for a child: its pid, the read end of its status pipe, and what that pipe said so far."""
        r, w = os.pipe()
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0))
        try:
            with self.send_lock:
                socket.send_fds(self.sock, [json.dumps(request).encode()], [fd, w])
        finally:
            os.close(fd)
            os.close(w)
        said = read_status(r, "pid")
        if "pid" not in said:
            os.close(r)
            raise RuntimeError(f"the fork server (pid {self.proc.pid}) ended before it started the run; exit code "
                               f"{self.proc.poll()}")
        return int(said["pid"]), r, said


def read_status(fd: int, until: str) -> dict[str, str]:
    """The lines of a status pipe up to the one tagged ``until`` (or its end): tag -> value."""
    said: dict[str, str] = {}
    while until not in said:
        line = b""
        while not line.endswith(b"\n"):
            chunk = os.read(fd, 1)
            if not chunk:
                return said
            line += chunk
        tag, _, value = line.decode().strip().partition(" ")
        said[tag] = value
    return said


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the launcher, which stops the runs it started
    import importlib

    for module in PRELOAD:
        importlib.import_module(module)

    serve(socket.socket(fileno=int(args[0])))


if __name__ == "__main__":
    main()
