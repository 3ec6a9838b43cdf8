"""Peak device memory of one forward and backward of FBTT's TT-EmbeddingBag as the SC24 artifact runs it (TT-Rec's
kernel library; ../reference tt-systems.md §2.4-2.5), for the artifact's Table 1. FBTT keeps, for every lookup of
the batch: its d core digits and its bag (int64 each), the forward's partial products (the prefix, q_0..q_{d-2}
times r_{d-1} floats) and its row (D floats), and in the backward one gradient slice of every core (r_k q_k r_{k+1}
floats each), which update_d_tt_cores_kernel adds into the dense core gradients. Beside them: the cores, their
dense gradient (as large), the pooled output [B, D] and its gradient.

Our TT-Rec (impls/ttrec) adds each chunk's slices into the core gradients as it goes and holds one chunk of rows:
its memory is counts.memory's, not this."""
from __future__ import annotations


def fbtt_peak_bytes(shape, batch_size: int, lookups: int) -> float:
    """FBTT's peak bytes (torch.cuda.max_memory_allocated after the backward) for one table of TT shape ``shape``."""
    per_lookup = 8 * (shape.d + 1) + 4 * (shape.prefix_width + shape.dim
                                          + sum(shape.core_shape(k)[1] for k in range(shape.d)))
    return 2 * 4 * shape.num_params + lookups * per_lookup + 2 * 4 * batch_size * shape.dim


def dense_bag_peak_bytes(rows: int, dim: int, batch_size: int, lookups: int) -> float:
    """The same for PyTorch's nn.EmbeddingBag with sparse gradients: the table, one gradient row per lookup, the
    output and its gradient."""
    return 4 * rows * dim + 4 * lookups * dim + 2 * 4 * batch_size * dim
