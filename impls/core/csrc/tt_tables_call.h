// What every op that steps several TT tables in one call (ecorec_tables_*, elrec_tables_*, ttrec_tables_*: schemas
// in ops.cpp) shares, host side, on every backend: the tables' layout checked, each table's view of the call (its
// cores, radices, ranks, rows; which of the batch's tables it reads), and a table's errors raised under its name.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "op_args.h"

namespace dlrmbench {

// One TT table of the call: its slice of cores (and of grad_cores, backward), q and r; its row limit.
struct TableOfCall {
  int64_t first_core, num_cores;
  c10::IntArrayRef q, r;
  int64_t num_rows;
  at::TensorList of(at::TensorList all) const { return all.slice(first_core, num_cores); }
};

// The T tables of a call: cores_per_table[t] cores each (d_t), q the tables' radices end to end (d_t each), r their
// ranks end to end (d_t + 1 each), num_rows one per table.
inline std::vector<TableOfCall> tables_of_call(const char* op, at::TensorList cores, c10::IntArrayRef cores_per_table,
                                               c10::IntArrayRef q, c10::IntArrayRef r, c10::IntArrayRef num_rows) {
  const int64_t T = static_cast<int64_t>(cores_per_table.size());
  TORCH_CHECK_VALUE(static_cast<int64_t>(num_rows.size()) == T, op, ": num_rows has ", num_rows.size(),
                    " entries for ", T, " tables (cores_per_table)");
  std::vector<TableOfCall> out;
  int64_t c = 0, qi = 0, ri = 0;
  for (int64_t t = 0; t < T; ++t) {
    const int64_t d = cores_per_table[t];
    TORCH_CHECK_VALUE(d >= 2, op, ": table ", t, " has ", d, " cores (cores_per_table); a TT table has at least 2");
    TORCH_CHECK_VALUE(c + d <= static_cast<int64_t>(cores.size()) && qi + d <= static_cast<int64_t>(q.size()) &&
                          ri + d + 1 <= static_cast<int64_t>(r.size()),
                      op, ": table ", t, " needs ", d, " cores, ", d, " radices and ", d + 1, " ranks past those of "
                      "the tables before it; the call has ", cores.size(), " cores, ", q.size(), " radices, ",
                      r.size(), " ranks in all");
    out.push_back({c, d, q.slice(qi, d), r.slice(ri, d + 1), num_rows[t]});
    c += d;
    qi += d;
    ri += d + 1;
  }
  TORCH_CHECK_VALUE(c == static_cast<int64_t>(cores.size()) && qi == static_cast<int64_t>(q.size()) &&
                        ri == static_cast<int64_t>(r.size()),
                    op, ": the ", T, " tables take ", c, " cores, ", qi, " radices and ", ri, " ranks, but the call "
                    "has ", cores.size(), ", ", q.size(), " and ", r.size());
  return out;
}

// The batch's tables the call reads (tables[k] for its TT table k) lie in a KJT of offsets.numel() - 1 =
// num_tables * batch_size bags.
inline int64_t check_batch_tables(const char* op, const at::Tensor& offsets, int64_t batch_size,
                                  c10::IntArrayRef tables, int64_t T) {
  TORCH_CHECK_VALUE(batch_size > 0, op, ": batch_size must be > 0, got ", batch_size);
  TORCH_CHECK_VALUE(offsets.dim() == 1 && offsets.numel() >= 1 && (offsets.numel() - 1) % batch_size == 0, op,
                    ": offsets must hold num_tables * batch_size + 1 entries (batch_size ", batch_size, "), got ",
                    offsets.numel());
  const int64_t in_batch = (offsets.numel() - 1) / batch_size;
  TORCH_CHECK_VALUE(static_cast<int64_t>(tables.size()) == T, op, ": tables names ", tables.size(),
                    " of the batch's tables for ", T, " TT tables");
  for (int64_t k = 0; k < T; ++k)
    TORCH_CHECK_VALUE(tables[k] >= 0 && tables[k] < in_batch, op, ": tables[", k, "] = ", tables[k],
                      " but the batch has ", in_batch, " tables");
  return in_batch;
}

// TT table k (the batch's table `table`) reads values[lo:hi] of a batch of nnz ids.
inline void check_table_span(const char* op, int64_t k, int64_t table, int64_t lo, int64_t hi, int64_t nnz) {
  TORCH_CHECK_VALUE(0 <= lo && lo <= hi && hi <= nnz, op, ": the batch's table ", table, " (TT table ", k,
                    ") spans values[", lo, ":", hi, "] of ", nnz);
}

// What a call returns as N lists of one tensor per table: table k's outputs (a tuple of N tensors) set at k.
template <size_t N>
struct PerTableOutputs {
  std::array<std::vector<at::Tensor>, N> lists;
  explicit PerTableOutputs(int64_t T) {
    for (auto& list : lists) list.resize(T);
  }
  template <typename Tuple>
  void set(int64_t k, const Tuple& table) {
    std::apply([&](const auto&... x) {
      size_t i = 0;
      ((lists[i++][k] = x), ...);
    }, table);
  }
  auto as_tuple() const {
    return std::apply([](const auto&... list) { return std::make_tuple(list...); }, lists);
  }
};

// Lists of one tensor per table (what a forward saved, the tables' gradients): named as the schema names them.
inline void check_per_table(const char* op, int64_t T,
                            std::initializer_list<std::pair<const char*, at::TensorList>> lists) {
  for (const auto& [name, list] : lists)
    TORCH_CHECK_VALUE(static_cast<int64_t>(list.size()) == T, op, ": ", name, " has ", list.size(),
                      " tensors for ", T, " tables");
}

inline void check_grad_cores(const char* op, at::TensorList cores, at::TensorList grad_cores) {
  TORCH_CHECK_VALUE(grad_cores.size() == cores.size(), op, ": grad_cores has ", grad_cores.size(),
                    " tensors for ", cores.size(), " cores");
}

// fn() for TT table k (the batch's table `table`; -1: not known to the call), a ValueError it raises named for the
// table.
template <typename Fn>
auto for_table(const char* op, int64_t k, int64_t table, Fn fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const c10::ValueError& e) {
    const std::string which = table >= 0 ? " (the batch's table " + std::to_string(table) + ")" : "";
    TORCH_CHECK_VALUE(false, op, ": TT table ", k, which, ": ", e.what_without_backtrace());
  }
}

}  // namespace dlrmbench
