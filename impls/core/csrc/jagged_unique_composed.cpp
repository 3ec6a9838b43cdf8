// jagged_unique on a GPU (schema in ops.cpp), composed of ATen device ops:
// two stable sorts give the (table, id, position) order, run starts give the unique ids, and a scatter
// writes the inverse. Same outputs as the CPU kernel.
#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/logical_or.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/nonzero.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/repeat_interleave.h>
#include <ATen/ops/searchsorted.h>
#include <ATen/ops/sort.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/zeros.h>
#include <c10/core/DeviceGuard.h>

#include <tuple>

#include "composed.h"
#include "op_args.h"

namespace dlrmbench {
namespace {

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> jagged_unique_composed(
    const at::Tensor& values, const at::Tensor& offsets, int64_t num_tables, int64_t batch_size) {
  check_jagged_unique_args(values, offsets, num_tables, batch_size);
  const c10::DeviceGuard guard(values.device());
  const auto v = values.contiguous();
  const int64_t nnz = v.numel();
  const auto opts = v.options();
  const auto bounds = offsets.slice(0, 0, num_tables * batch_size + 1, batch_size).contiguous();  // [T+1]
  check_table_bounds(bounds.cpu().data_ptr<int64_t>(), num_tables, nnz);  // one sync, before any index is used
  const auto table_len = at::sub(bounds.slice(0, 1), bounds.slice(0, 0, num_tables));
  const auto table_of = at::repeat_interleave(at::arange(num_tables, opts), table_len, 0, nnz);
  const auto by_id = std::get<1>(at::sort(v, /*stable=*/true, 0, false));
  const auto by_table = std::get<1>(at::sort(at::index_select(table_of, 0, by_id), true, 0, false));
  const auto sorted_positions = at::index_select(by_id, 0, by_table);
  const auto sv = at::index_select(v, 0, sorted_positions);
  const auto st = at::index_select(table_of, 0, sorted_positions);
  auto starts = at::ones({nnz}, opts.dtype(at::kBool));
  if (nnz > 1) {
    starts.slice(0, 1).copy_(at::logical_or(at::ne(sv.slice(0, 1), sv.slice(0, 0, nnz - 1)),
                                            at::ne(st.slice(0, 1), st.slice(0, 0, nnz - 1))));
  }
  const auto rank = at::sub(at::cumsum(starts, 0, at::kLong), 1);
  const auto first = at::nonzero(starts).view({-1});
  const auto unique = at::index_select(sv, 0, first);
  const int64_t U = unique.numel();
  auto ends = at::empty({U}, opts);
  if (U > 0) {
    ends.slice(0, 0, U - 1).copy_(first.slice(0, 1));
    ends.slice(0, U - 1).fill_(nnz);
  }
  const auto counts = at::sub(ends, first);
  auto inverse = at::empty({nnz}, opts);
  inverse.index_copy_(0, sorted_positions, rank);
  const auto table_offsets =
      at::searchsorted(at::index_select(st, 0, first), at::arange(num_tables + 1, opts), false, false);
  return {unique, table_offsets, inverse, counts, sorted_positions};
}

}  // namespace

DLRMBENCH_COMPOSED("jagged_unique", jagged_unique_composed)

}  // namespace dlrmbench
