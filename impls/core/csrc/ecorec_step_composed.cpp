// ecorec_forward / ecorec_backward on a GPU (schemas in ops.cpp), composed of ATen device ops and the dlrmbench ops
// (jagged_unique, tt_stages, tt_stages_backward, scatter_add_rows, gather_pool: called through the dispatcher, so
// each backend's kernels run). The same outputs as the CPU kernels; one host read per step (the micro-batches'
// occurrence bounds) and one per micro-batch (its prefix-group count).
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/div.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/repeat_interleave.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/unique_consecutive.h>
#include <ATen/ops/zeros.h>
#include <c10/core/DeviceGuard.h>

#include <algorithm>
#include <tuple>
#include <vector>

#include "composed.h"
#include "ecorec_args.h"

namespace dlrmbench {
namespace {

using Tensors5 = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;
using Tensors6 = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

// One micro-batch's prefix groups over ascending ids: distinct prefixes, each id's group and last digit.
std::tuple<at::Tensor, at::Tensor, at::Tensor> prefix_groups(const at::Tensor& ids, int64_t p_last) {
  const at::Tensor prefix = at::div(ids, p_last, "floor");
  auto [prefix_ids, group_of, counts] = at::unique_consecutive(prefix, /*return_inverse=*/true);
  return {prefix_ids, group_of, at::sub(ids, prefix.mul(p_last))};
}

// A host vector as an int64 tensor where ``opts`` says.
at::Tensor from_host(const std::vector<int64_t>& v, const at::TensorOptions& opts) {
  auto t = at::empty({static_cast<int64_t>(v.size())}, opts.device(at::kCPU));
  std::copy(v.begin(), v.end(), t.data_ptr<int64_t>());
  return t.to(opts.device());
}

void call_stages(at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r, const at::Tensor& prefix_ids,
                 const at::Tensor& group_of, const at::Tensor& last, const at::Tensor& out, int64_t num_rows) {
  static const auto h = dispatcher_op("dlrmbench::tt_stages")
                            .typed<void(at::TensorList, c10::IntArrayRef, c10::IntArrayRef, const at::Tensor&,
                                        const at::Tensor&, const at::Tensor&, at::Tensor, bool, int64_t)>();
  h.call(cores, q, r, prefix_ids, group_of, last, out, false, num_rows);
}

Tensors6 ecorec_forward_composed(at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r, const at::Tensor& values,
                                 const at::Tensor& offsets, int64_t batch_size, int64_t micro_batches,
                                 int64_t min_chunk, int64_t num_rows) {
  const char* name = "ecorec_forward";
  const TTShape s = check_ecorec_forward_args(name, cores, q, r, values, offsets, batch_size, micro_batches, min_chunk);
  const c10::DeviceGuard guard(values.device());
  const int64_t nnz = values.numel(), D = s.dim(), p_last = s.p[s.d - 1];
  const auto opts = values.options().dtype(at::kLong);
  static const auto dedup = dispatcher_op("dlrmbench::jagged_unique")
                                .typed<Tensors5(const at::Tensor&, const at::Tensor&, int64_t, int64_t)>();
  auto [unique, table_offsets, inverse, counts, sorted_positions] = dedup.call(values, offsets, 1, batch_size);
  const int64_t U = unique.numel();
  auto count_offsets = at::zeros({U + 1}, opts);
  count_offsets.slice(0, 1).copy_(at::cumsum(counts, 0));
  const auto lengths = at::sub(offsets.slice(0, 1), offsets.slice(0, 0, batch_size));
  const auto occ_bags =
      at::index_select(at::repeat_interleave(at::arange(batch_size, opts), lengths, 0, nnz), 0, sorted_positions);
  const std::vector<int64_t> bounds = micro_batch_bounds(U, micro_batches, min_chunk);
  const int64_t m = static_cast<int64_t>(bounds.size()) - 1;
  const auto chunk_bounds = from_host(bounds, opts);
  const auto cuts = at::index_select(count_offsets, 0, chunk_bounds).cpu();  // one host read for every chunk
  const int64_t* cut = cuts.data_ptr<int64_t>();
  std::vector<int64_t> groups(m);
  auto out = at::zeros({batch_size, D}, cores[0].options());
  static const auto scatter = dispatcher_op("dlrmbench::scatter_add_rows")
                                  .typed<void(const at::Tensor&, const at::Tensor&, const at::Tensor&, at::Tensor,
                                              bool)>();
  for (int64_t k = 0; k < m; ++k) {
    const int64_t lo = bounds[k], hi = bounds[k + 1];
    auto [prefix_ids, group_of, last] = prefix_groups(unique.slice(0, lo, hi), p_last);
    groups[k] = prefix_ids.numel();
    const auto emb = cores[0].new_empty({hi - lo, D});
    call_stages(cores, q, r, prefix_ids, group_of, last, emb, num_rows);
    const auto occ_unique =
        at::repeat_interleave(at::arange(hi - lo, opts), counts.slice(0, lo, hi), 0, cut[k + 1] - cut[k]);
    scatter.call(emb, occ_unique, occ_bags.slice(0, cut[k], cut[k + 1]), out, false);
  }
  return {out, unique, count_offsets, occ_bags, chunk_bounds, from_host(groups, opts)};
}

void ecorec_backward_composed(at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r, const at::Tensor& unique,
                              const at::Tensor& count_offsets, const at::Tensor& occ_bags,
                              const at::Tensor& chunk_bounds, const at::Tensor& grad, at::TensorList grad_cores,
                              int64_t num_rows) {
  const char* name = "ecorec_backward";
  const TTShape s =
      check_ecorec_backward_args(name, cores, q, r, unique, count_offsets, occ_bags, chunk_bounds, grad, grad_cores);
  const c10::DeviceGuard guard(unique.device());
  const int64_t D = s.dim(), p_last = s.p[s.d - 1];
  const auto bounds = chunk_bounds.cpu();
  const auto cuts = at::index_select(count_offsets, 0, chunk_bounds).cpu();
  const int64_t* cb = bounds.data_ptr<int64_t>();
  const int64_t* cut = cuts.data_ptr<int64_t>();
  static const auto pool = dispatcher_op("dlrmbench::gather_pool")
                               .typed<void(const at::Tensor&, const at::Tensor&, const at::Tensor&, at::Tensor,
                                           bool)>();
  static const auto stages_bwd =
      dispatcher_op("dlrmbench::tt_stages_backward")
          .typed<void(at::TensorList, c10::IntArrayRef, c10::IntArrayRef, const at::Tensor&, const at::Tensor&,
                      const at::Tensor&, const at::Tensor&, at::TensorList, bool, int64_t)>();
  const auto g = grad.contiguous();
  for (int64_t k = 0; k + 1 < bounds.numel(); ++k) {
    const int64_t lo = cb[k], hi = cb[k + 1];
    auto d_unique = at::zeros({hi - lo, D}, g.options());  // C: occurrences -> unique ids
    pool.call(g, occ_bags.slice(0, cut[k], cut[k + 1]), at::sub(count_offsets.slice(0, lo, hi + 1), cut[k]), d_unique,
              false);
    auto [prefix_ids, group_of, last] = prefix_groups(unique.slice(0, lo, hi), p_last);
    stages_bwd.call(cores, q, r, prefix_ids, group_of, last, d_unique, grad_cores, false, num_rows);
  }
}

}  // namespace

DLRMBENCH_COMPOSED("ecorec_forward", ecorec_forward_composed)
DLRMBENCH_COMPOSED("ecorec_backward", ecorec_backward_composed)

}  // namespace dlrmbench
