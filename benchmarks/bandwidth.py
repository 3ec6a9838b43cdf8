"""The machine's cache sizes and the copy bandwidth each level past L1 delivers, for the memory-aware limits of
`make bench` (docs/systems/tt.md). A level's bandwidth is that of a copy whose source and destination fit in it
together (bytes read plus bytes written, the best of 3 timings of at least MIN_BYTES each): L2 within half of one
core's L2, counted once per thread; L3 within half the shared L3; DRAM far past any cache (LevelCopies)."""
from __future__ import annotations

from pathlib import Path

import torch

from benchmarks.conftest import timed

MIN_BYTES = 1 << 28  # moved per timing: a copy that fits in L2 is repeated until it has moved this much
DRAM_FLOATS = 1 << 26  # 256 MiB per side of the copy past any cache
SYSFS = Path("/sys/devices/system/cpu/cpu0/cache")


def cache_bytes() -> dict[str, int]:
    """Bytes of the per-core L2 and the shared L3 of CPU 0 (sysfs); a level the machine does not report is absent."""
    sizes = {}
    for index in sorted(SYSFS.glob("index*")) if SYSFS.is_dir() else []:
        try:
            level, kind = (index / "level").read_text().strip(), (index / "type").read_text().strip()
            size = (index / "size").read_text().strip()
        except OSError:
            continue
        if kind in ("Unified", "Data") and level in ("2", "3"):
            units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
            sizes[f"L{level}"] = int(size[:-1]) * units[size[-1]] if size[-1] in units else int(size)
    return sizes


def capacity(threads: int) -> dict[str, int]:
    """What the limit's levels hold: L2 as every thread's core's L2 together, L3 as the shared L3 (a level the machine
    does not report holds nothing: its streams are served by the next one)."""
    sizes = cache_bytes()
    return {"L2": sizes.get("L2", 0) * threads, "L3": sizes.get("L3", 0)}


class LevelCopies:
    """The buffers each level's copy runs on, allocated once. L2: source and destination together half of one core's
    L2, copied on one thread and its rate counted once per thread (each core copies within its own L2; a copy of so
    few bytes spread over the threads would time their start and join more than the copy); L3: half of L3 on every
    thread; DRAM: DRAM_FLOATS each way on every thread."""

    def __init__(self, threads: int) -> None:
        self.threads = threads
        sizes = cache_bytes()
        floats = {"L2": sizes.get("L2", 0) // 16, "L3": sizes.get("L3", 0) // 16, "DRAM": DRAM_FLOATS}  # per side
        self.buffers = {lv: (torch.ones(n), torch.empty(n)) for lv, n in floats.items() if n >= 1 << 12}

    def bandwidths(self) -> dict[str, float]:
        """Bytes per second of each level's copy now (L2: all the threads' cores together)."""
        out = {}
        for lv, (src, dst) in self.buffers.items():
            if lv == "L2":
                before = torch.get_num_threads()
                torch.set_num_threads(1)
                try:
                    out[lv] = self.threads * copy_bandwidth(src, dst)
                finally:
                    torch.set_num_threads(before)
            else:
                out[lv] = copy_bandwidth(src, dst)
        return out

    def sizes(self) -> dict[str, int]:
        """Bytes of each level's copy (source and destination)."""
        return {lv: 2 * src.numel() * src.element_size() for lv, (src, _) in self.buffers.items()}


def copy_bandwidth(src: torch.Tensor, dst: torch.Tensor) -> float:
    """Bytes per second (read plus written) of dst.copy_(src), repeated to move at least MIN_BYTES: the best of 3."""
    moved = 2 * src.numel() * src.element_size()
    reps = max(1, -(-MIN_BYTES // moved))

    def copies():
        for _ in range(reps):
            dst.copy_(src)

    copies()
    return reps * moved / min(timed(copies) for _ in range(3))
