"""TT-Rec's hot-row cache (FBTT-Embedding's LFU cache), with a write-back FBTT lacks.

Counting: every forward inserts the batch's ids into an open-addressing frequency table (multiplicative
hash, linear probing, at most 3 probes as FBTT's MAX_PROBES; an id that finds no slot in 3 probes is not
counted, as in FBTT). Populate (explicit, or every N forwards): the top-K counted ids become the cache,
materialized from the TT cores; every other key is evicted from the frequency table (FBTT resets them too).
Lookups of cached ids then read the dense cache rows; the rest run the TT schedule.

Write-back (the choice this project makes, documented here): cached rows train as dense rows, and the
gradients they receive are also accumulated per row. Before the cache is re-populated (or flushed) the
accumulated gradient is pushed through the TT chain as one core update, J^T * sum(g) (one optimizer step
on the cores with the rows' summed gradient). For SGD this is, to first order, exactly the core update the
uncached lookups would have made (evaluated at the cores at write-back time), so nothing learned by the
cached rows is dropped; FBTT instead overwrites them from the cores and loses those updates."""
from __future__ import annotations

import torch
from torch import Tensor, nn

MAX_PROBES = 3
_GOLDEN = -7046029254386353131  # 0x9E3779B97F4A7C15 as a signed int64


class FrequencyTable:
    """Per-id lookup counts in a fixed-size open-addressing table (keys -1 = empty)."""

    def __init__(self, size: int, device: torch.device) -> None:
        size = 1 << max(4, int(size - 1).bit_length())  # a power of two
        self.mask = size - 1
        self.keys = torch.full((size,), -1, dtype=torch.int64, device=device)
        self.counts = torch.zeros(size, dtype=torch.int64, device=device)
        self.dropped = 0  # distinct-id insertions that found no slot within MAX_PROBES

    def apply_state(self, fn) -> None:
        """Move the table with its module (impls/state.py: move_state)."""
        self.keys, self.counts = fn(self.keys), fn(self.counts)

    def _home(self, ids: Tensor) -> Tensor:
        return ((ids * _GOLDEN) >> 32) & self.mask

    def add(self, ids: Tensor) -> None:
        if ids.numel() == 0:
            return
        uniq, cnt = torch.unique(ids, return_counts=True)
        home = self._home(uniq)
        pending = torch.arange(uniq.numel(), device=ids.device)
        for probe in range(MAX_PROBES):
            if pending.numel() == 0:
                break
            slot = (home[pending] + probe) & self.mask
            key = self.keys[slot]
            hit = key == uniq[pending]
            self.counts.index_add_(0, slot[hit], cnt[pending[hit]])
            free = key == -1
            cand, cslot = pending[free], slot[free]
            # several new ids may want the same free slot: the first (smallest id) takes it
            first = torch.ones_like(cslot, dtype=torch.bool)
            if cslot.numel() > 1:
                order = torch.argsort(cslot, stable=True)
                s = cslot[order]
                dup = torch.zeros_like(first)
                dup[1:] = s[1:] == s[:-1]
                first[order] = ~dup
            win, wslot = cand[first], cslot[first]
            self.keys[wslot] = uniq[win]
            self.counts[wslot] = cnt[win]
            placed = torch.zeros(uniq.numel(), dtype=torch.bool, device=ids.device)
            placed[pending[hit]] = True
            placed[win] = True
            pending = pending[~placed[pending]]
        self.dropped += int(pending.numel())

    def count(self, ids: Tensor) -> Tensor:
        """The counts of ``ids`` (0 for ids not in the table)."""
        home = self._home(ids)
        out = torch.zeros_like(ids)
        for probe in range(MAX_PROBES):
            slot = (home + probe) & self.mask
            out = torch.where(self.keys[slot] == ids, self.counts[slot], out)
        return out

    def top(self, k: int) -> Tensor:
        """The ``k`` most counted ids (fewer if fewer were counted); every other key is evicted."""
        used = self.keys >= 0
        n = min(int(k), int(used.sum()))
        order = torch.argsort(torch.where(used, self.counts, -1), descending=True, stable=True)
        keep = order[:n]
        ids = self.keys[keep].clone()
        survivors = torch.zeros_like(used)
        survivors[keep] = True
        self.keys[~survivors] = -1
        self.counts[~survivors] = 0
        return ids


class HotRowCache(nn.Module):
    """The cache of one TT table: sorted cached ids, their dense rows (a parameter with sparse gradients),
    optimizer state, the per-row accumulated gradient for the write-back, and hit counters."""

    def __init__(self, rows: int, dim: int, capacity: int, hash_size: int, device: torch.device) -> None:
        super().__init__()
        self.capacity = min(int(capacity), int(rows))
        self.freq = FrequencyTable(hash_size, device)
        self.ids = torch.zeros(0, dtype=torch.int64, device=device)
        self.weight = nn.Parameter(torch.zeros(0, dim, device=device))
        self.state: Tensor | None = None
        self.grad_acc = torch.zeros(0, dim, device=device)
        self.forwards = 0
        self.hits = 0
        self.lookups = 0

    def get_extra_state(self) -> dict:
        """Everything but the cached rows (the parameter ``weight``): ids, optimizer state, accumulated gradient,
        the frequency table and the counters, so a resumed run goes on as the uninterrupted one."""
        f = self.freq
        return {"ids": self.ids, "state": self.state, "grad_acc": self.grad_acc, "freq_keys": f.keys,
                "freq_counts": f.counts, "freq_dropped": f.dropped, "forwards": self.forwards, "hits": self.hits,
                "lookups": self.lookups}

    def set_extra_state(self, state: dict) -> None:
        dev = self.freq.keys.device
        self.ids, self.grad_acc = state["ids"].to(dev), state["grad_acc"].to(dev)
        self.state = None if state["state"] is None else state["state"].to(dev)
        self.freq.keys.copy_(state["freq_keys"])
        self.freq.counts.copy_(state["freq_counts"])
        self.freq.dropped, self.forwards = int(state["freq_dropped"]), int(state["forwards"])
        self.hits, self.lookups = int(state["hits"]), int(state["lookups"])

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs) -> None:
        w = state_dict.get(prefix + "weight")  # the cache's row count is what the run populated, not the build's
        if w is not None and w.shape != self.weight.shape:
            self.weight = nn.Parameter(torch.empty(w.shape, dtype=w.dtype, device=self.weight.device))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    @property
    def active(self) -> bool:
        return self.ids.numel() > 0

    def slots(self, values: Tensor) -> tuple[Tensor, Tensor]:
        """(slot of each value in the cache, hit mask)."""
        if not self.active:
            return torch.zeros_like(values), torch.zeros_like(values, dtype=torch.bool)
        pos = torch.searchsorted(self.ids, values).clamp(max=self.ids.numel() - 1)
        return pos, self.ids[pos] == values

    def fill(self, ids: Tensor, rows: Tensor, state: Tensor | None) -> None:
        order = torch.argsort(ids)
        self.ids = ids[order]
        self.weight = nn.Parameter(rows[order].contiguous())
        self.state = state
        self.grad_acc = torch.zeros_like(self.weight.data)

    @property
    def nbytes(self) -> int:
        t = [self.ids, self.weight.data, self.grad_acc, self.freq.keys, self.freq.counts]
        if self.state is not None:
            t.append(self.state)
        return sum(x.numel() * x.element_size() for x in t)
