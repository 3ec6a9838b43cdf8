// CPU kernels of the row pooling ops (schemas in ../ops.cpp):
//   gather_pool:      out[s] += sum of src[index[j]] over segment s (parallel over segments, no locks);
//   scatter_add_rows: out[dst[j]] += src[src_index[j]] (in j order per fixed chunk of entries, each chunk into
//                     its own copy of out: deterministic).
// The first pools bags and aggregates gradients per unique id; the second expands a micro-batch of
// unique rows into the bags that use them.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include "../op_args.h"
#include "cpu_util.h"

namespace dlrmbench {
namespace {

void gather_pool_cpu(const at::Tensor& src, const at::Tensor& index, const at::Tensor& segment_offsets,
                     at::Tensor out, bool /*check_indices*/) {
  const char* op = "gather_pool";
  const int64_t S = check_gather_pool_args(src, index, segment_offsets, out);
  const auto idx_c = index.contiguous();
  const auto off_c = segment_offsets.contiguous();
  const int64_t* idx = idx_c.data_ptr<int64_t>();
  const int64_t* off = off_c.data_ptr<int64_t>();
  const int64_t n = idx_c.numel();
  TORCH_CHECK_VALUE(off[0] == 0 && off[S] == n, op, ": segment_offsets must run from 0 to len(index) = ", n,
                    ", got ", off[0], " .. ", off[S]);
  for (int64_t s = 0; s < S; ++s)
    TORCH_CHECK_VALUE(off[s + 1] >= off[s], op, ": segment_offsets decrease at ", s + 1);
  check_range(op, "index", idx, n, src.size(0));
  const int64_t D = src.size(1);
  const float* x = src.data_ptr<float>();
  float* y = out.data_ptr<float>();
  at::parallel_for(0, S, 64, [&](int64_t lo, int64_t hi) {
    for (int64_t s = lo; s < hi; ++s)
      for (int64_t j = off[s]; j < off[s + 1]; ++j) add_row(y + s * D, x + idx[j] * D, D);
  });
}

void scatter_add_rows_cpu(const at::Tensor& src, const at::Tensor& src_index, const at::Tensor& dst_index,
                          at::Tensor out, bool /*check_indices*/) {
  const char* op = "scatter_add_rows";
  check_scatter_add_rows_args(src, src_index, dst_index, out);
  const int64_t n = src_index.numel();
  const auto si_c = src_index.contiguous();
  const auto di_c = dst_index.contiguous();
  const int64_t* si = si_c.data_ptr<int64_t>();
  const int64_t* di = di_c.data_ptr<int64_t>();
  check_range(op, "src_index", si, n, src.size(0));
  check_range(op, "dst_index", di, n, out.size(0));
  const int64_t D = src.size(1);
  const float* x = src.data_ptr<float>();
  float* y = out.data_ptr<float>();
  // In j order per fixed chunk of entries, each chunk into its own copy of out, the copies added in chunk order
  // (deterministic for any thread count; chunked_scatter_add). An entry's work counts as 4 D: a row add is
  // bound by its random source row, not by its D adds.
  chunked_scatter_add(n, 4 * D, out.size(0), D, y, [](int64_t b) { return b; },
                      [&](int64_t lo, int64_t hi, float* dst) {
                        for (int64_t j = lo; j < hi; ++j) add_row(dst + di[j] * D, x + si[j] * D, D);
                      });
}

}  // namespace

TORCH_LIBRARY_IMPL(dlrmbench, CPU, m) {
  m.impl("gather_pool", &gather_pool_cpu);
  m.impl("scatter_add_rows", &scatter_add_rows_cpu);
}

}  // namespace dlrmbench
