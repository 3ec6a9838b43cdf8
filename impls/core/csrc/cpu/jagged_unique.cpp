// CPU kernel of dlrmbench::jagged_unique (schema in ../ops.cpp): per-table sort of (id, position)
// pairs, in parallel over tables, then a parallel fill of the outputs.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "../op_args.h"

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

namespace dlrmbench {
namespace {

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> jagged_unique_cpu(
    const at::Tensor& values, const at::Tensor& offsets, int64_t num_tables, int64_t batch_size) {
  check_jagged_unique_args(values, offsets, num_tables, batch_size);
  const auto v_c = values.contiguous();
  const auto o_c = offsets.contiguous();
  const int64_t* v = v_c.data_ptr<int64_t>();
  const int64_t* o = o_c.data_ptr<int64_t>();
  const int64_t nnz = values.numel();
  for (int64_t t = 0; t <= num_tables; ++t) {  // table boundaries must be in range (bags are not read)
    const int64_t b = o[t * batch_size];
    TORCH_CHECK_VALUE(b >= 0 && b <= nnz && (t == 0 || b >= o[(t - 1) * batch_size]),
                      "jagged_unique: offsets at table boundary ", t, " out of order or range");
  }
  const auto opts = values.options().dtype(at::kLong);

  auto sorted_positions = at::empty({nnz}, opts);
  auto inverse = at::empty({nnz}, opts);
  auto table_offsets = at::empty({num_tables + 1}, opts);
  int64_t* sp = sorted_positions.data_ptr<int64_t>();
  int64_t* inv = inverse.data_ptr<int64_t>();
  int64_t* toff = table_offsets.data_ptr<int64_t>();

  // Pass 1: sort each table's (id, position) pairs; write the back map and a per-table rank
  // (index of the id among that table's unique ids) into `inverse` temporarily.
  std::vector<int64_t> table_unique(num_tables, 0);
  at::parallel_for(0, num_tables, 1, [&](int64_t lo, int64_t hi) {
    std::vector<std::pair<int64_t, int64_t>> pairs;
    for (int64_t t = lo; t < hi; ++t) {
      const int64_t start = o[t * batch_size];
      const int64_t end = o[(t + 1) * batch_size];
      pairs.resize(end - start);
      for (int64_t p = start; p < end; ++p) pairs[p - start] = {v[p], p};
      std::sort(pairs.begin(), pairs.end());
      int64_t rank = -1;
      for (int64_t k = 0; k < end - start; ++k) {
        if (k == 0 || pairs[k].first != pairs[k - 1].first) ++rank;
        sp[start + k] = pairs[k].second;
        inv[pairs[k].second] = rank;
      }
      table_unique[t] = rank + 1;
    }
  });
  toff[0] = 0;
  for (int64_t t = 0; t < num_tables; ++t) toff[t + 1] = toff[t] + table_unique[t];
  const int64_t U = toff[num_tables];

  // Pass 2: unique ids and counts from the sorted order; globalize the inverse.
  auto unique = at::empty({U}, opts);
  auto counts = at::empty({U}, opts);
  int64_t* uq = unique.data_ptr<int64_t>();
  int64_t* cnt = counts.data_ptr<int64_t>();
  std::fill(cnt, cnt + U, 0);
  at::parallel_for(0, num_tables, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      const int64_t base = toff[t];
      for (int64_t k = o[t * batch_size]; k < o[(t + 1) * batch_size]; ++k) {
        const int64_t p = sp[k];
        const int64_t u = base + inv[p];
        uq[u] = v[p];
        cnt[u] += 1;
        inv[p] = u;
      }
    }
  });
  return {unique, table_offsets, inverse, counts, sorted_positions};
}

}  // namespace

TORCH_LIBRARY_IMPL(dlrmbench, CPU, m) { m.impl("jagged_unique", &jagged_unique_cpu); }

}  // namespace dlrmbench
