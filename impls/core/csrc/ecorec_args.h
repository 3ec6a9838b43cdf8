// What every backend of ecorec_forward / ecorec_backward shares (host side): argument checks and the micro-batch
// rule. Data-reading checks live with each backend.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "op_args.h"
#include "tt_args.h"

namespace dlrmbench {

// The micro-batches of U sorted unique ids as the SC24 artifact cuts them: m contiguous chunks, or ceil(U /
// min_chunk) when m chunks would hold fewer than min_chunk ids each; at most U; sizes floor / ceil(U / m), the first
// U mod m one larger. Returns the m + 1 bounds (none but {0} for U = 0). impls/ecorec/collection.py states the same
// rule (micro_batch_bounds), and a test holds the two together.
inline std::vector<int64_t> micro_batch_bounds(int64_t U, int64_t micro_batches, int64_t min_chunk) {
  std::vector<int64_t> bounds{0};
  if (U == 0) return bounds;
  int64_t m = std::max<int64_t>(1, micro_batches);
  if ((U + m - 1) / m < min_chunk) m = (U + std::max<int64_t>(min_chunk, 1) - 1) / std::max<int64_t>(min_chunk, 1);
  m = std::max<int64_t>(1, std::min(m, U));
  const int64_t base = U / m, extra = U % m;
  for (int64_t i = 0; i < m; ++i) bounds.push_back(bounds.back() + base + (i < extra ? 1 : 0));
  return bounds;
}

inline TTShape check_ecorec_forward_args(const char* op, at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r,
                                         const at::Tensor& values, const at::Tensor& offsets, int64_t batch_size,
                                         int64_t micro_batches, int64_t min_chunk) {
  const TTShape s = parse_tt_shape(op, cores, q, r);
  check_index(op, "values", values, cores[0]);
  check_index(op, "offsets", offsets, cores[0]);
  TORCH_CHECK_VALUE(batch_size > 0, op, ": batch_size must be > 0, got ", batch_size);
  TORCH_CHECK_VALUE(offsets.numel() == batch_size + 1, op, ": offsets has ", offsets.numel(),
                    " entries, expected batch_size + 1 = ", batch_size + 1);
  TORCH_CHECK_VALUE(micro_batches >= 1 && min_chunk >= 1, op, ": micro_batches and min_chunk must be >= 1, got ",
                    micro_batches, " and ", min_chunk);
  return s;
}

inline TTShape check_ecorec_backward_args(const char* op, at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r,
                                          const at::Tensor& unique, const at::Tensor& count_offsets,
                                          const at::Tensor& occ_bags, const at::Tensor& chunk_bounds,
                                          const at::Tensor& grad, at::TensorList grad_cores) {
  const TTShape s = parse_tt_shape(op, cores, q, r);
  check_index(op, "unique", unique, cores[0]);
  check_index(op, "count_offsets", count_offsets, cores[0]);
  check_index(op, "occ_bags", occ_bags, cores[0]);
  check_index(op, "chunk_bounds", chunk_bounds, cores[0]);
  TORCH_CHECK_VALUE(count_offsets.numel() == unique.numel() + 1, op, ": count_offsets has ", count_offsets.numel(),
                    " entries, expected len(unique) + 1 = ", unique.numel() + 1);
  TORCH_CHECK_VALUE(chunk_bounds.numel() >= 1, op, ": chunk_bounds is empty (it holds at least the 0 bound)");
  check_rows(op, "grad", grad, -1, s.dim(), cores[0]);
  check_all_core_grads(op, s, cores, grad_cores);
  return s;
}

}  // namespace dlrmbench
