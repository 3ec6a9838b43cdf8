"""The worker of a point whose system comes from outside this repository: load its spec (systems.load: the class
registers under its name), then run the point as the worker runs ours. ``python -m reproduce.harness.outside_worker
--system SPEC <the worker's arguments>``; the launcher starts it (systems.launch_module), under torchrun too."""
from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2 or args[0] != "--system":
        raise SystemExit("usage: python -m reproduce.harness.outside_worker --system SPEC <worker arguments>")
    from reproduce.harness import systems, worker

    systems.load(args[1])
    return worker.main(args[2:])


if __name__ == "__main__":
    from reproduce.harness.worker import exit_now

    exit_now(main())
