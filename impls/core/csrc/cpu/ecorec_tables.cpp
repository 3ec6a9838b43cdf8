// CPU kernels of dlrmbench::ecorec_tables_forward / ecorec_tables_backward (schemas in ../ops.cpp): EcoRec's step
// over every TT table of a batch in one call each way, each table's step that of ecorec_forward / ecorec_backward
// (ecorec_step.cpp). Threads work within a table and across tables: a table of at least kOwnThreads lookups runs
// alone with every thread inside its step, the smaller ones side by side, one table per thread at a time (a table's
// step inside another parallel region runs on its thread alone). A table's result never depends on how many threads
// made it (ecorec_step.cpp), so neither does the call's.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/sub.h>
#include <torch/library.h>

#include <cstdint>
#include <tuple>
#include <vector>

#include "../ecorec_tables.h"
#include "../op_args.h"
#include "ecorec_step.h"

namespace dlrmbench {
namespace {

constexpr int64_t kOwnThreads = 1 << 15;  // lookups from which a table's step gets every thread to itself

// run(k) for every table k, those of at least kOwnThreads of work(k) one after another (each parallel inside),
// then the rest across the threads.
template <typename Work, typename Run>
void across_tables(int64_t T, Work work, Run run) {
  std::vector<int64_t> small;
  for (int64_t k = 0; k < T; ++k) {
    if (work(k) >= kOwnThreads)
      run(k);
    else
      small.push_back(k);
  }
  at::parallel_for(0, static_cast<int64_t>(small.size()), 1, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) run(small[i]);
  });
}

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
  std::vector<std::vector<at::Tensor>> out(6, std::vector<at::Tensor>(T));
  if (T == 0) return {out[0], out[1], out[2], out[3], out[4], out[5]};
  check_index(op, "values", values, cores[0]);
  check_index(op, "offsets", offsets, cores[0]);
  const auto off_c = offsets.contiguous();
  const int64_t* off = off_c.data_ptr<int64_t>();
  const int64_t nnz = values.numel();
  for (int64_t k = 0; k < T; ++k) {
    const int64_t lo = off[tables[k] * B], hi = off[(tables[k] + 1) * B];
    TORCH_CHECK_VALUE(0 <= lo && lo <= hi && hi <= nnz, op, ": the batch's table ", tables[k], " (TT table ", k,
                      ") spans values[", lo, ":", hi, "] of ", nnz);
  }
  auto nnz_of = [&](int64_t k) { return off[(tables[k] + 1) * B] - off[tables[k] * B]; };
  across_tables(T, nnz_of, [&](int64_t k) {
    const TableOfCall& t = tt[k];
    const int64_t base = off[tables[k] * B];
    const at::Tensor v = values.narrow(0, base, nnz_of(k));
    const at::Tensor o = at::sub(off_c.narrow(0, tables[k] * B, B + 1), base);
    auto res = for_table(op, k, tables[k], [&] {
      return ecorec_forward_cpu(t.of(cores), t.q, t.r, v, o, B, micro_batches, min_chunk, t.num_rows);
    });
    out[0][k] = std::get<0>(res);
    out[1][k] = std::get<1>(res);
    out[2][k] = std::get<2>(res);
    out[3][k] = std::get<3>(res);
    out[4][k] = std::get<4>(res);
    out[5][k] = std::get<5>(res);
  });
  return {out[0], out[1], out[2], out[3], out[4], out[5]};
}

void ecorec_tables_backward_cpu(at::TensorList cores, c10::IntArrayRef cores_per_table, c10::IntArrayRef q,
                                c10::IntArrayRef r, at::TensorList unique, at::TensorList count_offsets,
                                at::TensorList occ_bags, at::TensorList chunk_bounds, at::TensorList grads,
                                at::TensorList grad_cores, c10::IntArrayRef num_rows) {
  const char* op = "ecorec_tables_backward";
  const std::vector<TableOfCall> tt = tables_of_call(op, cores, cores_per_table, q, r, num_rows);
  const int64_t T = static_cast<int64_t>(tt.size());
  check_saved_lists(op, T, unique, count_offsets, occ_bags, chunk_bounds, grads, cores, grad_cores);
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
