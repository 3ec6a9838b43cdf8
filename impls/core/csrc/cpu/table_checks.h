// The checks of one table's jagged ids and of what a step's forward saved for its backward, shared by the CPU table
// steps (ecorec_step.cpp, tt_tables.cpp). Each names the first offending entry.
#pragma once

#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "../tt_args.h"
#include "cpu_util.h"

namespace dlrmbench {

// The bags' offsets run from 0 to nnz and never decrease (every position has one bag).
inline void check_bag_offsets(const char* op, const int64_t* off, int64_t B, int64_t nnz) {
  TORCH_CHECK_VALUE(off[0] == 0 && off[B] == nnz, op, ": offsets must run from 0 to len(values) = ", nnz, ", got ",
                    off[0], " .. ", off[B]);
  for (int64_t b = 0; b < B; ++b)
    TORCH_CHECK_VALUE(off[b + 1] >= off[b], op, ": offsets decrease at bag ", b, " (", off[b], " -> ", off[b + 1], ")");
}

// The rows an id may name: the table's (num_rows, at most the cores' cover), or the cover when num_rows < 0.
inline int64_t row_limit(const char* op, const TTShape& s, int64_t num_rows) {
  const int64_t cover = s.num_prefixes() * s.p[s.d - 1];
  TORCH_CHECK_VALUE(num_rows >= -1 && num_rows <= cover, op, ": num_rows = ", num_rows, " but the cores cover ", cover,
                    " rows (-1: the cover)");
  return num_rows >= 0 ? num_rows : cover;
}

// The first id outside [0, limit) and where it is (its position and bag): raised as a ValueError.
[[noreturn]] inline void name_bad_id(const char* op, const int64_t* v, const int64_t* off, int64_t B, int64_t limit) {
  const int64_t j = std::find_if(v, v + off[B], [&](int64_t x) { return x < 0 || x >= limit; }) - v;
  const int64_t b = std::upper_bound(off, off + B + 1, j) - off - 1;
  TORCH_CHECK_VALUE(false, op, ": values[", j, "] (bag ", b, ") reads row ", v[j], " of a table of ", limit,
                    " rows: the id is out of range");
}

// What the backward reads of the forward's outputs is what the forward wrote: occurrence offsets from 0 to nnz
// that never decrease, bags in [0, B), micro-batch bounds from 0 to U that never decrease, ids ascending.
// The scans run in parallel and only name the first offending entry (serially) when one is found.
inline void check_ecorec_saved(const char* op, const int64_t* uq, int64_t U, const int64_t* co, const int64_t* ob,
                        int64_t nnz, int64_t B, const int64_t* cb, int64_t m, int64_t limit) {
  TORCH_CHECK_VALUE(co[0] == 0 && co[U] == nnz, op, ": count_offsets must run from 0 to len(occ_bags) = ", nnz);
  std::atomic<bool> bad_units{false};
  at::parallel_for(0, U, 1 << 14, [&](int64_t u0, int64_t u1) {
    bool bad = false;
    for (int64_t u = u0; u < u1; ++u) bad |= co[u + 1] < co[u] || (u > 0 && uq[u] <= uq[u - 1]);
    if (bad) bad_units = true;
  });
  for (int64_t u = 0; bad_units && u < U; ++u) {
    TORCH_CHECK_VALUE(co[u + 1] >= co[u], op, ": count_offsets decrease at ", u + 1);
    TORCH_CHECK_VALUE(u == 0 || uq[u] > uq[u - 1], op, ": unique ids must ascend; unique[", u, "] = ", uq[u]);
  }
  check_range(op, "occ_bags", ob, nnz, B);
  // ascending: the first and the last id bound them all (each names a row of the cores)
  TORCH_CHECK_VALUE(U == 0 || (uq[0] >= 0 && uq[U - 1] < limit), op, ": unique ids must lie in [0, ", limit,
                    "), got ", U ? uq[0] : 0, " .. ", U ? uq[U - 1] : 0);
  TORCH_CHECK_VALUE(cb[0] == 0 && cb[m] == U, op, ": chunk_bounds must run from 0 to len(unique) = ", U);
  for (int64_t k = 0; k < m; ++k) TORCH_CHECK_VALUE(cb[k + 1] >= cb[k], op, ": chunk_bounds decrease at ", k + 1);
}

// Every id of a table's batch in [0, limit): one parallel scan, the first outside named (name_bad_id).
inline void check_ids(const char* op, const int64_t* v, const int64_t* off, int64_t B, int64_t limit) {
  std::atomic<bool> bad{false};
  at::parallel_for(0, off[B], 1 << 14, [&](int64_t lo, int64_t hi) {
    bool out = false;
    for (int64_t j = lo; j < hi; ++j) out |= v[j] < 0 || v[j] >= limit;
    if (out) bad = true;
  });
  if (bad) name_bad_id(op, v, off, B, limit);
}

}  // namespace dlrmbench
