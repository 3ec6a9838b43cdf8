"""torchrun with a short grace period when it stops a failed run's ranks (``python -m reproduce.harness.torchrun`` takes
torchrun's arguments). When one rank fails, torchrun sends the others SIGTERM and waits for them before SIGKILL;
that wait is 30 s on its failure path whatever ``--shutdown-timeout`` says (torch 2.13 passes the option to a
signal-triggered shutdown only). A rank that is hung or stopped never answers SIGTERM, so every such run would
end 30 s late. Here the wait is at most GRACE_S: a healthy rank exits on SIGTERM at once (it only has to die;
the record is written by the launcher from the ranks' error files and torchrun's log)."""
from __future__ import annotations

GRACE_S = 5


def main() -> None:
    from torch.distributed.elastic.multiprocessing import api
    from torch.distributed.run import main as torchrun

    original = api.PContext.close

    def close(self, death_sig=None, timeout: int = 30) -> None:
        original(self, death_sig, min(timeout, GRACE_S))

    api.PContext.close = close
    torchrun()


if __name__ == "__main__":
    main()
