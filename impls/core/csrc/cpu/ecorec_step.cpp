// CPU kernels of dlrmbench::ecorec_forward / ecorec_backward (schemas in ../ops.cpp): EcoRec's whole table step in
// one call each. Forward: sort and deduplicate the ids with the bag of every occurrence (ecorec_index.h), the
// sorted unique ids cut into micro-batches (the artifact's rule), the prefix groups of every micro-batch (C), and
// both TT stages over all of them in one pooled walk (M) whose stage-2 epilogue adds each row into the bags of its
// occurrences (cpu_kernels.h: tt_stages_pooled). Backward: the same groups again, and one pooled walk back whose
// stage-2 prologue sums each unique id's gradient from its occurrences' bags (C) before the stages walk back into
// the core gradients (M). No row per unique id is ever written to memory, and no index work leaves the call: the
// Python schedule it replaces (impls/ecorec/collection.py, kept as the reference) ran each of these steps as its
// own torch pass per chunk. The micro-batches keep the artifact's prefix groups (a prefix in two micro-batches is
// made twice, as there) and its FLOP counts; on a CPU they no longer bound a buffer, so they are walked together.
// A profiler sees the pooled walks under the stage ops' names (make bench's step profile counts them as time
// inside the TT kernels) and the index work as ecorec.* scopes.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/zeros.h>
#include <ATen/record_function.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <vector>

#include "../ecorec_args.h"
#include "../op_args.h"
#include "cpu_kernels.h"
#include "cpu_util.h"
#include "ecorec_index.h"
#include "ecorec_step.h"

namespace dlrmbench {
namespace {

// The prefix groups of every micro-batch over the ascending unique ids (micro-batch k: [bounds[k], bounds[k + 1])),
// numbered on from one micro-batch to the next: the distinct prefixes (id div p_last) of each micro-batch and where
// each group's ids start (group x: ids group_start[x] .. group_start[x + 1]); groups_per[k]: micro-batch k's number
// of groups. Nothing per id is written. The arrays are reused from call to call (cpu_util.h: Reused), the tensors
// views of them for this call only.
struct Groups {
  Reused<int64_t, struct PrefixIdsTag> pid_buf;
  Reused<int64_t, struct GroupStartTag> start_buf;
  at::Tensor prefix_ids, group_start;
  explicit Groups(int64_t n) : pid_buf(n), start_buf(n + 1) {}
};

void prefix_groups(Groups& g, const int64_t* uq, const std::vector<int64_t>& bounds, int64_t p_last,
                   const at::TensorOptions& opts, int64_t* groups_per) {
  const int64_t n = bounds.back(), m = static_cast<int64_t>(bounds.size()) - 1;
  int64_t* pid = g.pid_buf.get();
  int64_t* st = g.start_buf.get();
  // One pass in chunks of the ids (the result is one function of the ids, whatever the chunks): chunk c writes its
  // groups (prefix, first id) into slots from its own first id on (a chunk has no more groups than ids: the chunks'
  // slots never overlap), then the chunks' groups move down, in chunk order, to lie end to end. A group starts at the
  // first id of a micro-batch and wherever the prefix changes. Each id's prefix is a multiply (DivideBy), and
  // whether it starts a group is written without a branch: which ids start groups follows no pattern a branch
  // predictor could learn. A chunk is walked in segments cut at the micro-batch bounds, so no id tests for one.
  const DivideBy divide(p_last);
  const int64_t C = std::max<int64_t>(1, std::min<int64_t>(64, n / 8192)), per = n ? (n + C - 1) / C : 1;
  std::vector<int64_t> next(C), first_group(m + 1, -1);  // next: chunk c's next slot
  at::parallel_for(0, C, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t i1 = std::min(n, (c + 1) * per);
      int64_t x = std::min(n, c * per), junk[2];  // an id that starts no group writes into junk (a select)
      for (int64_t s0 = x; s0 < i1;) {  // ids [s0, s1) of micro-batch k
        const int64_t k = std::upper_bound(bounds.begin(), bounds.end(), s0) - bounds.begin() - 1;
        const int64_t s1 = std::min(i1, bounds[k + 1]);
        if (s0 == bounds[k]) first_group[k] = x;
        int64_t prev = s0 == bounds[k] ? -1 : divide(uq[s0 - 1]);
        for (int64_t i = s0; i < s1; ++i) {
          const int64_t p = divide(uq[i]);
          const bool is_start = p != prev;
          *(is_start ? pid + x : junk) = p;
          *(is_start ? st + x : junk + 1) = i;
          x += is_start;
          prev = p;
        }
        s0 = s1;
      }
      next[c] = x;
    }
  });
  int64_t e = 0;  // the groups so far, end to end
  std::vector<int64_t> shift(C);  // how far down chunk c's groups moved
  for (int64_t c = 0; c < C; ++c) {
    const int64_t from = std::min(n, c * per), count = next[c] - from;
    std::memmove(pid + e, pid + from, count * sizeof(int64_t));
    std::memmove(st + e, st + from, count * sizeof(int64_t));
    shift[c] = from - e;
    e += count;
  }
  st[e] = n;
  for (int64_t k = 0; k < m; ++k)
    if (first_group[k] >= 0) first_group[k] -= shift[bounds[k] / per];
  first_group[m] = e;
  for (int64_t k = m - 1; k >= 0; --k)  // an empty micro-batch has no group: it starts where the next one does
    if (first_group[k] < 0) first_group[k] = first_group[k + 1];
  for (int64_t k = 0; k < m; ++k) groups_per[k] = first_group[k + 1] - first_group[k];
  g.prefix_ids = at::from_blob(pid, {e}, opts);
  g.group_start = at::from_blob(st, {e + 1}, opts);
}

// The bags' offsets run from 0 to nnz and never decrease (every position has one bag).
void check_bag_offsets(const char* op, const int64_t* off, int64_t B, int64_t nnz) {
  TORCH_CHECK_VALUE(off[0] == 0 && off[B] == nnz, op, ": offsets must run from 0 to len(values) = ", nnz, ", got ",
                    off[0], " .. ", off[B]);
  for (int64_t b = 0; b < B; ++b)
    TORCH_CHECK_VALUE(off[b + 1] >= off[b], op, ": offsets decrease at bag ", b, " (", off[b], " -> ", off[b + 1], ")");
}

// The rows an id may name: the table's (num_rows, at most the cores' cover), or the cover when num_rows < 0.
int64_t row_limit(const char* op, const TTShape& s, int64_t num_rows) {
  const int64_t cover = s.num_prefixes() * s.p[s.d - 1];
  TORCH_CHECK_VALUE(num_rows >= -1 && num_rows <= cover, op, ": num_rows = ", num_rows, " but the cores cover ", cover,
                    " rows (-1: the cover)");
  return num_rows >= 0 ? num_rows : cover;
}

// The first id outside [0, limit) and where it is (its position and bag): raised as a ValueError.
[[noreturn]] void name_bad_id(const char* op, const int64_t* v, const int64_t* off, int64_t B, int64_t limit) {
  const int64_t j = std::find_if(v, v + off[B], [&](int64_t x) { return x < 0 || x >= limit; }) - v;
  const int64_t b = std::upper_bound(off, off + B + 1, j) - off - 1;
  TORCH_CHECK_VALUE(false, op, ": values[", j, "] (bag ", b, ") reads row ", v[j], " of a table of ", limit,
                    " rows: the id is out of range");
}

// What the backward reads of the forward's outputs is what the forward wrote: occurrence offsets from 0 to nnz
// that never decrease, bags in [0, B), micro-batch bounds from 0 to U that never decrease, ids ascending.
// The scans run in parallel and only name the first offending entry (serially) when one is found.
void check_ecorec_saved(const char* op, const int64_t* uq, int64_t U, const int64_t* co, const int64_t* ob,
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

}  // namespace

EcoRecForward ecorec_forward_cpu(
    at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r, const at::Tensor& values, const at::Tensor& offsets,
    int64_t batch_size, int64_t micro_batches, int64_t min_chunk, int64_t num_rows) {
  const char* op = "ecorec_forward";
  const TTShape s = check_ecorec_forward_args(op, cores, q, r, values, offsets, batch_size, micro_batches, min_chunk);
  const int64_t nnz = values.numel(), D = s.dim(), p_last = s.p[s.d - 1];
  const auto opts = values.options().dtype(at::kLong);
  const auto v_c = values.contiguous(), off_c = offsets.contiguous();
  const int64_t* off = off_c.data_ptr<int64_t>();
  check_bag_offsets(op, off, batch_size, nnz);
  const int64_t limit = row_limit(op, s, num_rows);
  OccurrenceIndex ix;
  {
    RECORD_FUNCTION("ecorec.dedup", c10::ArrayRef<const c10::IValue>{});
    ix = sort_occurrences(v_c.data_ptr<int64_t>(), off, batch_size, nnz, limit, opts);
  }
  if (!ix.in_range) name_bad_id(op, v_c.data_ptr<int64_t>(), off, batch_size, limit);
  const int64_t U = ix.unique.numel();
  const int64_t* uq = ix.unique.data_ptr<int64_t>();
  const std::vector<int64_t> bounds = micro_batch_bounds(U, micro_batches, min_chunk);
  const int64_t m = static_cast<int64_t>(bounds.size()) - 1;
  auto chunk_bounds = at::empty({m + 1}, opts);
  std::copy(bounds.begin(), bounds.end(), chunk_bounds.data_ptr<int64_t>());
  auto chunk_groups = at::empty({m}, opts);  // E1 of each micro-batch
  Groups g(U);
  {
    RECORD_FUNCTION("ecorec.groups", c10::ArrayRef<const c10::IValue>{});
    prefix_groups(g, uq, bounds, p_last, opts, chunk_groups.data_ptr<int64_t>());
  }
  auto out = at::zeros({batch_size, D}, cores[0].options());
  {
    RECORD_FUNCTION("dlrmbench::tt_stages", c10::ArrayRef<const c10::IValue>{});
    tt_stages_pooled_cpu_selected(cores, q, r, ix.unique, g.prefix_ids, g.group_start, ix.count_offsets, ix.occ_bags,
                                  out);
  }
  return {out, ix.unique, ix.count_offsets, ix.occ_bags, chunk_bounds, chunk_groups};
}

void ecorec_backward_cpu(at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r, const at::Tensor& unique,
                         const at::Tensor& count_offsets, const at::Tensor& occ_bags, const at::Tensor& chunk_bounds,
                         const at::Tensor& grad, at::TensorList grad_cores, int64_t num_rows) {
  const char* op = "ecorec_backward";
  const TTShape s =
      check_ecorec_backward_args(op, cores, q, r, unique, count_offsets, occ_bags, chunk_bounds, grad, grad_cores);
  const int64_t p_last = s.p[s.d - 1];
  const auto opts = unique.options();
  const auto uq_c = unique.contiguous(), co_c = count_offsets.contiguous(), ob_c = occ_bags.contiguous();
  const auto cb_c = chunk_bounds.contiguous(), grad_c = grad.contiguous();
  const int64_t* uq = uq_c.data_ptr<int64_t>();
  const int64_t* co = co_c.data_ptr<int64_t>();
  const int64_t* ob = ob_c.data_ptr<int64_t>();
  const int64_t* cb = cb_c.data_ptr<int64_t>();
  const int64_t nnz = occ_bags.numel();
  const int64_t limit = row_limit(op, s, num_rows);
  check_ecorec_saved(op, uq, unique.numel(), co, ob, nnz, grad.size(0), cb, chunk_bounds.numel() - 1, limit);
  const std::vector<int64_t> bounds(cb, cb + chunk_bounds.numel());
  std::vector<int64_t> groups_per(bounds.size() - 1);
  Groups g(bounds.back());
  {
    RECORD_FUNCTION("ecorec.groups", c10::ArrayRef<const c10::IValue>{});
    prefix_groups(g, uq, bounds, p_last, opts, groups_per.data());
  }
  RECORD_FUNCTION("dlrmbench::tt_stages_backward", c10::ArrayRef<const c10::IValue>{});
  tt_stages_backward_pooled_cpu_selected(cores, q, r, uq_c, g.prefix_ids, g.group_start, co_c, ob_c, grad_c,
                                         grad_cores);
}

TORCH_LIBRARY_IMPL(dlrmbench, CPU, m) {
  m.impl("ecorec_forward", &ecorec_forward_cpu);
  m.impl("ecorec_backward", &ecorec_backward_cpu);
}

}  // namespace dlrmbench
