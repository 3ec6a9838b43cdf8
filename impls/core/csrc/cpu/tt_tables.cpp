// CPU kernels of dlrmbench::ttrec_tables_forward / _backward and elrec_tables_forward / _backward (schemas in
// ../ops.cpp): TT-Rec's and EL-Rec's steps over every TT table of a batch in one call each way, on the pooled walks
// EcoRec's step runs (cpu_kernels.h: tt_stages_pooled / tt_stages_backward_pooled), the tables spread over the
// threads within and across tables (tables_call.h). Each schedule keeps its own work:
//   TT-Rec (FBTT): in chunks of `chunk` occurrences, every occurrence its own prefix and item: forward its row into
//                  its bag, nnz (a + b); backward its bag's gradient walked back through its chain, recomputed,
//                  nnz (3a + 2b). No dedup.
//   EL-Rec:        forward over the batch's sorted unique ids (ecorec_index.h), one stage-1 product per prefix
//                  group and stage 2 once per occurrence into its bag, E1 a + nnz b; backward the gradient summed
//                  per unique id from its occurrences' bags, then the full chain per unique id (no prefix reuse),
//                  U (3a + 2b).
#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/div.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <ATen/record_function.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <vector>

#include "../op_args.h"
#include "../tt_tables_call.h"
#include "cpu_kernels.h"
#include "cpu_util.h"
#include "ecorec_index.h"
#include "table_checks.h"
#include "tables_call.h"

namespace dlrmbench {
namespace {

using TensorVec = std::vector<at::Tensor>;

// One table's occurrences as TT-Rec walks them: each its own group (prefix id, group start, occurrence offset: all
// one per occurrence) and its bag.
struct Occurrences {
  at::Tensor prefix, one_each, bags;
  Occurrences(const at::Tensor& v, const int64_t* off, int64_t B, int64_t p_last) {
    const int64_t nnz = v.numel();
    prefix = at::empty({nnz}, v.options());
    one_each = at::empty({nnz + 1}, v.options());
    bags = at::empty({nnz}, v.options());
    const int64_t* ids = v.data_ptr<int64_t>();
    int64_t *px = prefix.data_ptr<int64_t>(), *each = one_each.data_ptr<int64_t>(), *bg = bags.data_ptr<int64_t>();
    const DivideBy divide(p_last);  // ids are checked: in [0, rows)
    at::parallel_for(0, nnz + 1, 1 << 14, [&](int64_t j0, int64_t j1) {
      for (int64_t j = j0; j < j1; ++j) each[j] = j;
      for (int64_t j = j0; j < std::min(j1, nnz); ++j) px[j] = divide(ids[j]);
    });
    at::parallel_for(0, B, 1024, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) std::fill(bg + off[b], bg + off[b + 1], b);
    });
  }
};

// The checks of one table's ids every TT-Rec call makes (ids in range, bag offsets from 0 to nnz).
TTShape check_ttrec_table(const char* op, at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r,
                          const at::Tensor& v, const int64_t* off, int64_t B, int64_t num_rows) {
  const TTShape s = parse_tt_shape(op, cores, q, r);
  check_bag_offsets(op, off, B, v.numel());
  check_ids(op, v.data_ptr<int64_t>(), off, B, row_limit(op, s, num_rows));
  return s;
}

// fn(lo, hi) per chunk [lo, hi) of `chunk` occurrences of n.
template <typename Fn>
void over_chunks(int64_t n, int64_t chunk, Fn fn) {
  for (int64_t lo = 0; lo < n; lo += chunk) fn(lo, std::min(n, lo + chunk));
}

at::Tensor ttrec_table_forward(const char* op, at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r,
                               const at::Tensor& v, const at::Tensor& o, int64_t B, int64_t chunk, int64_t num_rows) {
  const int64_t* off = o.data_ptr<int64_t>();
  const TTShape s = check_ttrec_table(op, cores, q, r, v, off, B, num_rows);
  const Occurrences occ(v, off, B, s.p[s.d - 1]);
  auto out = at::zeros({B, s.dim()}, cores[0].options());
  RECORD_FUNCTION("dlrmbench::tt_stages", c10::ArrayRef<const c10::IValue>{});
  over_chunks(v.numel(), chunk, [&](int64_t lo, int64_t hi) {
    const auto each = occ.one_each.narrow(0, 0, hi - lo + 1);
    tt_stages_pooled_cpu_selected(cores, q, r, v.narrow(0, lo, hi - lo), occ.prefix.narrow(0, lo, hi - lo), each,
                                  each, occ.bags.narrow(0, lo, hi - lo), out);
  });
  return out;
}

void ttrec_table_backward(const char* op, at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r,
                          const at::Tensor& v, const at::Tensor& o, int64_t B, int64_t chunk, const at::Tensor& grad,
                          at::TensorList grad_cores, int64_t num_rows) {
  const int64_t* off = o.data_ptr<int64_t>();
  const TTShape s = check_ttrec_table(op, cores, q, r, v, off, B, num_rows);
  check_rows(op, "grads", grad, B, s.dim(), cores[0]);
  check_all_core_grads(op, s, cores, grad_cores);
  const Occurrences occ(v, off, B, s.p[s.d - 1]);
  const auto g = grad.contiguous();
  RECORD_FUNCTION("dlrmbench::tt_stages_backward", c10::ArrayRef<const c10::IValue>{});
  over_chunks(v.numel(), chunk, [&](int64_t lo, int64_t hi) {
    const auto each = occ.one_each.narrow(0, 0, hi - lo + 1);
    tt_stages_backward_pooled_cpu_selected(cores, q, r, v.narrow(0, lo, hi - lo), occ.prefix.narrow(0, lo, hi - lo),
                                           each, each, occ.bags.narrow(0, lo, hi - lo), g, grad_cores);
  });
}

TensorVec ttrec_tables_forward_cpu(at::TensorList cores, c10::IntArrayRef cores_per_table, c10::IntArrayRef q,
                                   c10::IntArrayRef r, const at::Tensor& values, const at::Tensor& offsets,
                                   c10::IntArrayRef tables, int64_t batch_size, int64_t chunk,
                                   c10::IntArrayRef num_rows) {
  const char* op = "ttrec_tables_forward";
  const std::vector<TableOfCall> tt = tables_of_call(op, cores, cores_per_table, q, r, num_rows);
  const int64_t T = static_cast<int64_t>(tt.size()), B = batch_size;
  check_batch_tables(op, offsets, B, tables, T);
  TORCH_CHECK_VALUE(chunk >= 1, op, ": chunk must be >= 1, got ", chunk);
  TensorVec out(T);
  if (T == 0) return out;
  const BatchTables batch(op, values, offsets, tables, B, cores[0]);
  across_tables(T, [&](int64_t k) { return batch.nnz(k); }, [&](int64_t k) {
    const TableOfCall& t = tt[k];
    out[k] = for_table(op, k, tables[k], [&] {
      return ttrec_table_forward(op, t.of(cores), t.q, t.r, batch.values_of(k), batch.offsets_of(k), B, chunk,
                                 t.num_rows);
    });
  });
  return out;
}

void ttrec_tables_backward_cpu(at::TensorList cores, c10::IntArrayRef cores_per_table, c10::IntArrayRef q,
                               c10::IntArrayRef r, const at::Tensor& values, const at::Tensor& offsets,
                               c10::IntArrayRef tables, int64_t batch_size, int64_t chunk, at::TensorList grads,
                               at::TensorList grad_cores, c10::IntArrayRef num_rows) {
  const char* op = "ttrec_tables_backward";
  const std::vector<TableOfCall> tt = tables_of_call(op, cores, cores_per_table, q, r, num_rows);
  const int64_t T = static_cast<int64_t>(tt.size()), B = batch_size;
  check_batch_tables(op, offsets, B, tables, T);
  TORCH_CHECK_VALUE(chunk >= 1, op, ": chunk must be >= 1, got ", chunk);
  check_per_table(op, T, {{"grads", grads}});
  check_grad_cores(op, cores, grad_cores);
  if (T == 0) return;
  const BatchTables batch(op, values, offsets, tables, B, cores[0]);
  across_tables(T, [&](int64_t k) { return batch.nnz(k); }, [&](int64_t k) {
    const TableOfCall& t = tt[k];
    for_table(op, k, tables[k], [&] {
      ttrec_table_backward(op, t.of(cores), t.q, t.r, batch.values_of(k), batch.offsets_of(k), B, chunk, grads[k],
                           t.of(grad_cores), t.num_rows);
    });
  });
}

// EL-Rec's forward of one table: (out, unique, count_offsets, occ_bags, E1 as a one-entry tensor).
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> elrec_table_forward(
    const char* op, at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r, const at::Tensor& v,
    const at::Tensor& o, int64_t B, int64_t num_rows) {
  const TTShape s = parse_tt_shape(op, cores, q, r);
  const int64_t* off = o.data_ptr<int64_t>();
  const int64_t nnz = v.numel();
  check_bag_offsets(op, off, B, nnz);
  const int64_t limit = row_limit(op, s, num_rows);
  const auto opts = v.options();
  OccurrenceIndex ix;
  {
    RECORD_FUNCTION("elrec.dedup", c10::ArrayRef<const c10::IValue>{});
    ix = sort_occurrences(v.data_ptr<int64_t>(), off, B, nnz, limit, opts);
  }
  if (!ix.in_range) name_bad_id(op, v.data_ptr<int64_t>(), off, B, limit);
  const int64_t U = ix.unique.numel();
  auto e1 = at::empty({1}, opts);
  Groups g(U);
  {
    RECORD_FUNCTION("elrec.groups", c10::ArrayRef<const c10::IValue>{});
    prefix_groups(g, ix.unique.data_ptr<int64_t>(), {0, U}, s.p[s.d - 1], opts, e1.data_ptr<int64_t>());
  }
  auto out = at::zeros({B, s.dim()}, cores[0].options());
  {
    RECORD_FUNCTION("dlrmbench::tt_stages", c10::ArrayRef<const c10::IValue>{});
    tt_stages_pooled_cpu_selected(cores, q, r, ix.unique, g.prefix_ids, g.group_start, ix.count_offsets, ix.occ_bags,
                                  out, /*per_occurrence=*/true);
  }
  return {out, ix.unique, ix.count_offsets, ix.occ_bags, e1};
}

void elrec_table_backward(const char* op, at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r,
                          const at::Tensor& unique, const at::Tensor& count_offsets, const at::Tensor& occ_bags,
                          const at::Tensor& grad, at::TensorList grad_cores, int64_t num_rows) {
  const TTShape s = parse_tt_shape(op, cores, q, r);
  check_index(op, "unique", unique, cores[0]);
  check_index(op, "count_offsets", count_offsets, cores[0]);
  check_index(op, "occ_bags", occ_bags, cores[0]);
  TORCH_CHECK_VALUE(count_offsets.numel() == unique.numel() + 1, op, ": count_offsets has ", count_offsets.numel(),
                    " entries, expected len(unique) + 1 = ", unique.numel() + 1);
  check_rows(op, "grads", grad, -1, s.dim(), cores[0]);
  check_all_core_grads(op, s, cores, grad_cores);
  const auto uq = unique.contiguous(), co = count_offsets.contiguous(), ob = occ_bags.contiguous();
  const int64_t U = uq.numel();
  const int64_t one_chunk[2] = {0, U};
  check_ecorec_saved(op, uq.data_ptr<int64_t>(), U, co.data_ptr<int64_t>(), ob.data_ptr<int64_t>(), ob.numel(),
                     grad.size(0), one_chunk, 1, row_limit(op, s, num_rows));
  // one group per unique id: its own prefix, recomputed (EL-Rec's backward reuses no prefix)
  const auto prefix = at::div(uq, s.p[s.d - 1], "floor");
  RECORD_FUNCTION("dlrmbench::tt_stages_backward", c10::ArrayRef<const c10::IValue>{});
  tt_stages_backward_pooled_cpu_selected(cores, q, r, uq, prefix, at::arange(U + 1, uq.options()), co, ob,
                                         grad.contiguous(), grad_cores);
}

std::tuple<TensorVec, TensorVec, TensorVec, TensorVec, TensorVec> elrec_tables_forward_cpu(
    at::TensorList cores, c10::IntArrayRef cores_per_table, c10::IntArrayRef q, c10::IntArrayRef r,
    const at::Tensor& values, const at::Tensor& offsets, c10::IntArrayRef tables, int64_t batch_size,
    c10::IntArrayRef num_rows) {
  const char* op = "elrec_tables_forward";
  const std::vector<TableOfCall> tt = tables_of_call(op, cores, cores_per_table, q, r, num_rows);
  const int64_t T = static_cast<int64_t>(tt.size()), B = batch_size;
  check_batch_tables(op, offsets, B, tables, T);
  PerTableOutputs<5> out(T);
  if (T == 0) return out.as_tuple();
  const BatchTables batch(op, values, offsets, tables, B, cores[0]);
  across_tables(T, [&](int64_t k) { return batch.nnz(k); }, [&](int64_t k) {
    const TableOfCall& t = tt[k];
    out.set(k, for_table(op, k, tables[k], [&] {
      return elrec_table_forward(op, t.of(cores), t.q, t.r, batch.values_of(k), batch.offsets_of(k), B, t.num_rows);
    }));
  });
  return out.as_tuple();
}

void elrec_tables_backward_cpu(at::TensorList cores, c10::IntArrayRef cores_per_table, c10::IntArrayRef q,
                               c10::IntArrayRef r, at::TensorList unique, at::TensorList count_offsets,
                               at::TensorList occ_bags, at::TensorList grads, at::TensorList grad_cores,
                               c10::IntArrayRef num_rows) {
  const char* op = "elrec_tables_backward";
  const std::vector<TableOfCall> tt = tables_of_call(op, cores, cores_per_table, q, r, num_rows);
  const int64_t T = static_cast<int64_t>(tt.size());
  check_per_table(op, T, {{"unique", unique}, {"count_offsets", count_offsets}, {"occ_bags", occ_bags},
                         {"grads", grads}});
  check_grad_cores(op, cores, grad_cores);
  across_tables(T, [&](int64_t k) { return occ_bags[k].numel(); }, [&](int64_t k) {
    const TableOfCall& t = tt[k];
    for_table(op, k, -1, [&] {
      elrec_table_backward(op, t.of(cores), t.q, t.r, unique[k], count_offsets[k], occ_bags[k], grads[k],
                           t.of(grad_cores), t.num_rows);
    });
  });
}

}  // namespace

TORCH_LIBRARY_IMPL(dlrmbench, CPU, m) {
  m.impl("ttrec_tables_forward", &ttrec_tables_forward_cpu);
  m.impl("ttrec_tables_backward", &ttrec_tables_backward_cpu);
  m.impl("elrec_tables_forward", &elrec_tables_forward_cpu);
  m.impl("elrec_tables_backward", &elrec_tables_backward_cpu);
}

}  // namespace dlrmbench
