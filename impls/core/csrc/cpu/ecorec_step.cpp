// CPU kernels of dlrmbench::ecorec_forward / ecorec_backward (schemas in ../ops.cpp): EcoRec's whole table step in
// one call each. Forward: sort and deduplicate the ids with the bag of every occurrence (ecorec_index.h), the
// sorted unique ids cut into micro-batches (the artifact's rule), the prefix groups of every micro-batch (C), and
// both TT stages over all of them in one pooled walk (M) whose stage-2 epilogue adds each row into the bags of its
// occurrences (cpu_kernels.h: tt_stages_pooled). Backward: the same groups again, and one pooled walk back whose
// stage-2 prologue sums each unique id's gradient from its occurrences' bags (C) before the stages walk back into
// the core gradients (M). No row per unique id is ever written to memory, and no index work leaves the call: the
// Python schedule it replaces (impls/ecorec/collection.py, kept as the reference) ran each of these steps as its
// own torch pass per chunk. The micro-batches keep the artifact's prefix groups (a prefix in two micro-batches is
// made twice, as there) and its FLOP counts; on a CPU they no longer bound a buffer, so they are walked together.
// A profiler sees the pooled walks under the stage ops' names (make bench's step profile counts them as time
// inside the TT kernels) and the index work as ecorec.* scopes.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/zeros.h>
#include <ATen/record_function.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <vector>

#include "../ecorec_args.h"
#include "../op_args.h"
#include "cpu_kernels.h"
#include "cpu_util.h"
#include "ecorec_index.h"
#include "ecorec_step.h"
#include "table_checks.h"

namespace dlrmbench {

EcoRecForward ecorec_forward_cpu(
    at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r, const at::Tensor& values, const at::Tensor& offsets,
    int64_t batch_size, int64_t micro_batches, int64_t min_chunk, int64_t num_rows) {
  const char* op = "ecorec_forward";
  const TTShape s = check_ecorec_forward_args(op, cores, q, r, values, offsets, batch_size, micro_batches, min_chunk);
  const int64_t nnz = values.numel(), D = s.dim(), p_last = s.p[s.d - 1];
  const auto opts = values.options().dtype(at::kLong);
  const auto v_c = values.contiguous(), off_c = offsets.contiguous();
  const int64_t* off = off_c.data_ptr<int64_t>();
  check_bag_offsets(op, off, batch_size, nnz);
  const int64_t limit = row_limit(op, s, num_rows);
  OccurrenceIndex ix;
  {
    RECORD_FUNCTION("ecorec.dedup", c10::ArrayRef<const c10::IValue>{});
    ix = sort_occurrences(v_c.data_ptr<int64_t>(), off, batch_size, nnz, limit, opts);
  }
  if (!ix.in_range) name_bad_id(op, v_c.data_ptr<int64_t>(), off, batch_size, limit);
  const int64_t U = ix.unique.numel();
  const int64_t* uq = ix.unique.data_ptr<int64_t>();
  const std::vector<int64_t> bounds = micro_batch_bounds(U, micro_batches, min_chunk);
  const int64_t m = static_cast<int64_t>(bounds.size()) - 1;
  auto chunk_bounds = at::empty({m + 1}, opts);
  std::copy(bounds.begin(), bounds.end(), chunk_bounds.data_ptr<int64_t>());
  auto chunk_groups = at::empty({m}, opts);  // E1 of each micro-batch
  Groups g(U);
  {
    RECORD_FUNCTION("ecorec.groups", c10::ArrayRef<const c10::IValue>{});
    prefix_groups(g, uq, bounds, p_last, opts, chunk_groups.data_ptr<int64_t>());
  }
  auto out = at::zeros({batch_size, D}, cores[0].options());
  {
    RECORD_FUNCTION("dlrmbench::tt_stages", c10::ArrayRef<const c10::IValue>{});
    tt_stages_pooled_cpu_selected(cores, q, r, ix.unique, g.prefix_ids, g.group_start, ix.count_offsets, ix.occ_bags,
                                  out);
  }
  return {out, ix.unique, ix.count_offsets, ix.occ_bags, chunk_bounds, chunk_groups};
}

void ecorec_backward_cpu(at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r, const at::Tensor& unique,
                         const at::Tensor& count_offsets, const at::Tensor& occ_bags, const at::Tensor& chunk_bounds,
                         const at::Tensor& grad, at::TensorList grad_cores, int64_t num_rows) {
  const char* op = "ecorec_backward";
  const TTShape s =
      check_ecorec_backward_args(op, cores, q, r, unique, count_offsets, occ_bags, chunk_bounds, grad, grad_cores);
  const int64_t p_last = s.p[s.d - 1];
  const auto opts = unique.options();
  const auto uq_c = unique.contiguous(), co_c = count_offsets.contiguous(), ob_c = occ_bags.contiguous();
  const auto cb_c = chunk_bounds.contiguous(), grad_c = grad.contiguous();
  const int64_t* uq = uq_c.data_ptr<int64_t>();
  const int64_t* co = co_c.data_ptr<int64_t>();
  const int64_t* ob = ob_c.data_ptr<int64_t>();
  const int64_t* cb = cb_c.data_ptr<int64_t>();
  const int64_t nnz = occ_bags.numel();
  const int64_t limit = row_limit(op, s, num_rows);
  check_ecorec_saved(op, uq, unique.numel(), co, ob, nnz, grad.size(0), cb, chunk_bounds.numel() - 1, limit);
  const std::vector<int64_t> bounds(cb, cb + chunk_bounds.numel());
  std::vector<int64_t> groups_per(bounds.size() - 1);
  Groups g(bounds.back());
  {
    RECORD_FUNCTION("ecorec.groups", c10::ArrayRef<const c10::IValue>{});
    prefix_groups(g, uq, bounds, p_last, opts, groups_per.data());
  }
  RECORD_FUNCTION("dlrmbench::tt_stages_backward", c10::ArrayRef<const c10::IValue>{});
  tt_stages_backward_pooled_cpu_selected(cores, q, r, uq_c, g.prefix_ids, g.group_start, co_c, ob_c, grad_c,
                                         grad_cores);
}

TORCH_LIBRARY_IMPL(dlrmbench, CPU, m) {
  m.impl("ecorec_forward", &ecorec_forward_cpu);
  m.impl("ecorec_backward", &ecorec_backward_cpu);
}

}  // namespace dlrmbench
