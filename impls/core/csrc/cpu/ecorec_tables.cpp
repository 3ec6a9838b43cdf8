// CPU kernels of dlrmbench::ecorec_tables_forward / ecorec_tables_backward (schemas in ../ops.cpp): EcoRec's step
// over every TT table of a batch in one call each way, each table's step that of ecorec_forward / ecorec_backward
// (ecorec_step.cpp), the tables spread over the threads within and across tables (tables_call.h).
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include <cstdint>
#include <tuple>
#include <vector>

#include "../tt_tables_call.h"
#include "ecorec_step.h"
#include "tables_call.h"

namespace dlrmbench {
namespace {

std::tuple<std::vector<at::Tensor>, std::vector<at::Tensor>, std::vector<at::Tensor>, std::vector<at::Tensor>,
           std::vector<at::Tensor>, std::vector<at::Tensor>>
ecorec_tables_forward_cpu(at::TensorList cores, c10::IntArrayRef cores_per_table, c10::IntArrayRef q,
                          c10::IntArrayRef r, const at::Tensor& values, const at::Tensor& offsets,
                          c10::IntArrayRef tables, int64_t batch_size, int64_t micro_batches, int64_t min_chunk,
                          c10::IntArrayRef num_rows) {
  const char* op = "ecorec_tables_forward";
  const std::vector<TableOfCall> tt = tables_of_call(op, cores, cores_per_table, q, r, num_rows);
  const int64_t T = static_cast<int64_t>(tt.size()), B = batch_size;
  check_batch_tables(op, offsets, B, tables, T);
  PerTableOutputs<6> out(T);
  if (T == 0) return out.as_tuple();
  const BatchTables batch(op, values, offsets, tables, B, cores[0]);
  across_tables(T, [&](int64_t k) { return batch.nnz(k); }, [&](int64_t k) {
    const TableOfCall& t = tt[k];
    const at::Tensor v = batch.values_of(k), o = batch.offsets_of(k);
    out.set(k, for_table(op, k, tables[k], [&] {
      return ecorec_forward_cpu(t.of(cores), t.q, t.r, v, o, B, micro_batches, min_chunk, t.num_rows);
    }));
  });
  return out.as_tuple();
}

void ecorec_tables_backward_cpu(at::TensorList cores, c10::IntArrayRef cores_per_table, c10::IntArrayRef q,
                                c10::IntArrayRef r, at::TensorList unique, at::TensorList count_offsets,
                                at::TensorList occ_bags, at::TensorList chunk_bounds, at::TensorList grads,
                                at::TensorList grad_cores, c10::IntArrayRef num_rows) {
  const char* op = "ecorec_tables_backward";
  const std::vector<TableOfCall> tt = tables_of_call(op, cores, cores_per_table, q, r, num_rows);
  const int64_t T = static_cast<int64_t>(tt.size());
  check_per_table(op, T, {{"unique", unique}, {"count_offsets", count_offsets}, {"occ_bags", occ_bags},
                         {"chunk_bounds", chunk_bounds}, {"grads", grads}});
  check_grad_cores(op, cores, grad_cores);
  across_tables(T, [&](int64_t k) { return occ_bags[k].numel(); }, [&](int64_t k) {
    const TableOfCall& t = tt[k];
    for_table(op, k, -1, [&] {
      ecorec_backward_cpu(t.of(cores), t.q, t.r, unique[k], count_offsets[k], occ_bags[k], chunk_bounds[k], grads[k],
                          t.of(grad_cores), t.num_rows);
    });
  });
}

}  // namespace

TORCH_LIBRARY_IMPL(dlrmbench, CPU, m) {
  m.impl("ecorec_tables_forward", &ecorec_tables_forward_cpu);
  m.impl("ecorec_tables_backward", &ecorec_tables_backward_cpu);
}

}  // namespace dlrmbench
