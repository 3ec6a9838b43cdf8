// ecorec_tables_forward / ecorec_tables_backward on a GPU (schemas in ops.cpp): each TT table's step through the
// dispatcher's ecorec_forward / ecorec_backward (each backend's kernels run), one table after another on the stream;
// one host read per call (where each table's ids start and end in the batch).
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/tensor.h>
#include <c10/core/DeviceGuard.h>

#include <tuple>
#include <vector>

#include "composed.h"
#include "tt_tables_call.h"

namespace dlrmbench {
namespace {

using TableSteps = std::tuple<std::vector<at::Tensor>, std::vector<at::Tensor>, std::vector<at::Tensor>,
                              std::vector<at::Tensor>, std::vector<at::Tensor>, std::vector<at::Tensor>>;
using StepOutputs = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

TableSteps ecorec_tables_forward_composed(at::TensorList cores, c10::IntArrayRef cores_per_table, c10::IntArrayRef q,
                                          c10::IntArrayRef r, const at::Tensor& values, const at::Tensor& offsets,
                                          c10::IntArrayRef tables, int64_t batch_size, int64_t micro_batches,
                                          int64_t min_chunk, c10::IntArrayRef num_rows) {
  const char* op = "ecorec_tables_forward";
  const std::vector<TableOfCall> tt = tables_of_call(op, cores, cores_per_table, q, r, num_rows);
  const int64_t T = static_cast<int64_t>(tt.size()), B = batch_size;
  check_batch_tables(op, offsets, B, tables, T);
  PerTableOutputs<6> out(T);
  if (T == 0) return out.as_tuple();
  check_index(op, "values", values, cores[0]);
  check_index(op, "offsets", offsets, cores[0]);
  const c10::DeviceGuard guard(values.device());
  std::vector<int64_t> ends;  // each table's first and past-the-last bag offset
  for (int64_t k = 0; k < T; ++k) {
    ends.push_back(tables[k] * B);
    ends.push_back((tables[k] + 1) * B);
  }
  const auto where = at::tensor(ends, offsets.options()).to(offsets.device());
  const auto bounds = at::index_select(offsets, 0, where).cpu();
  const int64_t* bd = bounds.data_ptr<int64_t>();
  static const auto step = dispatcher_op("dlrmbench::ecorec_forward")
                               .typed<StepOutputs(at::TensorList, c10::IntArrayRef, c10::IntArrayRef,
                                                  const at::Tensor&, const at::Tensor&, int64_t, int64_t, int64_t,
                                                  int64_t)>();
  for (int64_t k = 0; k < T; ++k) {
    const int64_t lo = bd[2 * k], hi = bd[2 * k + 1];
    check_table_span(op, k, tables[k], lo, hi, values.numel());
    const TableOfCall& t = tt[k];
    out.set(k, for_table(op, k, tables[k], [&] {
      return step.call(t.of(cores), t.q, t.r, values.slice(0, lo, hi),
                       at::sub(offsets.slice(0, tables[k] * B, (tables[k] + 1) * B + 1), lo), B, micro_batches,
                       min_chunk, t.num_rows);
    }));
  }
  return out.as_tuple();
}

void ecorec_tables_backward_composed(at::TensorList cores, c10::IntArrayRef cores_per_table, c10::IntArrayRef q,
                                     c10::IntArrayRef r, at::TensorList unique, at::TensorList count_offsets,
                                     at::TensorList occ_bags, at::TensorList chunk_bounds, at::TensorList grads,
                                     at::TensorList grad_cores, c10::IntArrayRef num_rows) {
  const char* op = "ecorec_tables_backward";
  const std::vector<TableOfCall> tt = tables_of_call(op, cores, cores_per_table, q, r, num_rows);
  const int64_t T = static_cast<int64_t>(tt.size());
  check_per_table(op, T, {{"unique", unique}, {"count_offsets", count_offsets}, {"occ_bags", occ_bags},
                         {"chunk_bounds", chunk_bounds}, {"grads", grads}});
  check_grad_cores(op, cores, grad_cores);
  static const auto step = dispatcher_op("dlrmbench::ecorec_backward")
                               .typed<void(at::TensorList, c10::IntArrayRef, c10::IntArrayRef, const at::Tensor&,
                                           const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                           at::TensorList, int64_t)>();
  for (int64_t k = 0; k < T; ++k) {
    const TableOfCall& t = tt[k];
    for_table(op, k, -1, [&] {
      step.call(t.of(cores), t.q, t.r, unique[k], count_offsets[k], occ_bags[k], chunk_bounds[k], grads[k],
                t.of(grad_cores), t.num_rows);
    });
  }
}

}  // namespace

DLRMBENCH_COMPOSED("ecorec_tables_forward", ecorec_tables_forward_composed)
DLRMBENCH_COMPOSED("ecorec_tables_backward", ecorec_tables_backward_composed)

}  // namespace dlrmbench
