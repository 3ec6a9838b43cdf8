// How a CPU op over several TT tables of one batch (ecorec_tables.cpp, tt_tables.cpp) reads the batch and spreads
// its tables over the threads. A table's work never depends on the thread count, so neither does the call's.
#pragma once

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/sub.h>
#include <c10/util/Exception.h>

#include <cstdint>
#include <vector>

#include "../op_args.h"
#include "../tt_tables_call.h"

namespace dlrmbench {

constexpr int64_t kOwnThreads = 1 << 15;  // lookups from which a table's step gets every thread to itself

// run(k) for every table k: those of at least kOwnThreads of work(k) one after another, every thread inside each;
// then the rest side by side, one table per thread at a time (a table's step inside the parallel region runs on its
// thread alone).
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

// The TT tables' ids in a table-major batch (values [nnz], offsets [num_tables * B + 1] on the CPU): TT table k reads
// the batch's table tables[k]: values(k) its ids, offsets(k) its B + 1 bag offsets from 0.
struct BatchTables {
  at::Tensor values, off_c;
  const int64_t* off;
  c10::IntArrayRef tables;
  int64_t B;
  BatchTables(const char* op, const at::Tensor& v, const at::Tensor& offsets, c10::IntArrayRef tables_, int64_t B_,
              const at::Tensor& like)
      : values(v), off_c(offsets.contiguous()), off(nullptr), tables(tables_), B(B_) {
    check_index(op, "values", values, like);
    check_index(op, "offsets", offsets, like);
    off = off_c.data_ptr<int64_t>();
    for (size_t k = 0; k < tables.size(); ++k)
      check_table_span(op, k, tables[k], first(k), first(k) + nnz(k), values.numel());
  }
  int64_t first(int64_t k) const { return off[tables[k] * B]; }
  int64_t nnz(int64_t k) const { return off[(tables[k] + 1) * B] - first(k); }
  at::Tensor values_of(int64_t k) const { return values.narrow(0, first(k), nnz(k)); }
  at::Tensor offsets_of(int64_t k) const { return at::sub(off_c.narrow(0, tables[k] * B, B + 1), first(k)); }
};

}  // namespace dlrmbench
