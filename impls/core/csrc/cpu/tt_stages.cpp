// CPU kernels of the fused TT stages (schemas in ../ops.cpp): stage 1 and stage 2 (and, backward, the walk
// back through both) in one pass over stacks of prefixes, so a prefix product is consumed from L1/L2 right
// after it is made instead of through a [G, width] buffer in memory.
//   tt_stages:          per stack of <= kStack prefixes sharing the last prefix digit (one tall GEMM, as in
//                       tt_prefix), then every item of those prefixes (as in tt_last);
//   tt_stages_backward: per stack: the prefixes recomputed, stage 2 backward of their items (dP of the stack,
//                       dG_last), then the stacked stage-1 step (dG_1 of the stack's digit, dP_0 into dG_0).
// Same products and FLOPs as the separate ops. Gradients are deterministic and independent of the thread
// count: the prefixes are ordered by digit 1 and cut into run-aligned chunks whose number depends on the
// sizes only; a digit's run is summed whole by one chunk (dG_1), and dG_0 and dG_last go into each chunk's own
// copy, reduced in chunk order (cpu_util.h: chunked_scatter_add).
// The pooled variants (EcoRec's step, cpu_kernels.h) take a batch's unique ids as the items and its bags as the
// output: forward, each row goes from stage 2 into the bags of its occurrences (the C-M expansion in stage 2's
// epilogue; the same run-aligned chunks, each into its own copy of the bags); backward, each item's gradient is
// summed from its occurrences' bag gradients as the walk reaches its prefix (the M-C aggregation in stage 2's
// prologue). No row of the batch's unique ids is ever written to memory.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "../op_args.h"
#include "../tt_stages_composed.h"
#include "cpu_util.h"
#include "stage2.h"
#include "tt_chain.h"
#include "tt_kernels.h"

namespace dlrmbench {
inline namespace DLRMBENCH_ISA_NS {

constexpr int64_t kStagesGrain = 16;
constexpr int64_t kChunks = 8;  // the chunks of a deterministic call at most (each with its own copy of what it adds)
constexpr int64_t kScatterAhead = 4;  // occurrences: a bag's row is requested this far ahead of its add
constexpr int64_t kOccurrenceBlock = 256;  // per-occurrence stage 2: rows made at a time

// FLOPs of one prefix's stage-1 chain and of one item's stage-2 product.
inline int64_t stage1_flops(const TTShape& s) {
  int64_t f = 0;
  for (int t = 1; t <= s.d - 2; ++t) f += 2 * s.Q(t - 1) * s.r[t] * s.q[t] * s.r[t + 1];
  return f;
}
inline int64_t stage2_flops(const TTShape& s) { return 2 * s.Q(s.d - 2) * s.r[s.d - 1] * s.q[s.d - 1]; }

// Items ordered by group (stably) and each group's range in that order.
struct ItemsByGroup {
  std::vector<int64_t> order, start;
  ItemsByGroup(const int64_t* grp, int64_t n, int64_t groups) : order(order_by_group(grp, n, groups)), start(groups + 1, 0) {
    for (int64_t i = 0; i < n; ++i) ++start[grp[i] + 1];
    for (int64_t g = 0; g < groups; ++g) start[g + 1] += start[g];
  }
};

// A stack's prefixes come in digit order, their items anywhere in the item arrays: their first entries are
// requested for the whole stack before its stage-1 GEMM, which hides the misses behind it.
template <typename Fn>
inline void prefetch_stack(const std::vector<int64_t>& order, int64_t i, int64_t e, const std::vector<int64_t>& start,
                           Fn first_item) {
  for (int64_t b = i; b < e; ++b)
    if (start[order[b]] < start[order[b] + 1]) first_item(start[order[b]]);
}

// The prefixes of a call in the order its kernels walk them (by the last prefix digit, whose runs share one slice
// of the stage-1 core), and a cut of that order into chunks of about equal work, each cut at the start of a run so
// that a run's stage-1 slice (and, backward, its gradient row) belongs to one chunk. The number of chunks and the
// cuts depend on the sizes only (kChunks at most, fewer when the work is small next to the copy each chunk adds
// into, of copy_floats): a deterministic call's result never depends on the thread count.
struct PrefixWalk {
  PrefixDigits pd;
  std::vector<int64_t> order, cum;
  int64_t chunks = 1;
  PrefixWalk(const TTShape& s, const int64_t* ids, int64_t G)
      : pd(s, ids, G), order(order_by_last_prefix_digit(s, pd, G)) {}
  int64_t key(int64_t b) const { return pd.last(order[b]); }
  // work(x): prefix x's work (its stage-1 products and its items')
  template <typename Work>
  void balance(int64_t copy_floats, Work work) {
    const int64_t G = static_cast<int64_t>(order.size());
    cum.assign(G + 1, 0);
    for (int64_t b = 0; b < G; ++b) cum[b + 1] = cum[b] + work(order[b]);
    chunks = std::min<int64_t>(kChunks, 1 + cum[G] / (64 * std::max<int64_t>(copy_floats, 1)));
  }
  int64_t run_start_after(int64_t b) const {  // b = c * ceil(G / chunks): where work c/chunks ends, at a run start
    const int64_t G = static_cast<int64_t>(order.size());
    const double target = static_cast<double>(cum[G]) * static_cast<double>(b) / static_cast<double>(G);
    b = std::lower_bound(cum.begin(), cum.end(), static_cast<int64_t>(target)) - cum.begin();
    while (b > 0 && b < G && key(b) == key(b - 1)) ++b;
    return b;
  }
};

// Stage 1 and 2 over prefixes order[lo, hi) in stacks sharing the last prefix digit: per stack, the items' first
// entries requested (prefetch_item(k)), the stack's prefixes made (one tall GEMM), then per prefix x
// emit(x, P of x).
template <typename PrefetchItem, typename Emit>
inline void walk_stacks(const TTShape& s, const PrefixWalk& walk, const std::vector<int64_t>& start, int64_t lo,
                        int64_t hi, PrefixStack& stack, std::vector<float>& P, PrefetchItem prefetch_item, Emit emit) {
  const int64_t width = s.prefix_width();
  for_each_run(walk.order, lo, hi, [&](int64_t x) { return walk.pd.last(x); }, [&](int64_t i, int64_t e, int64_t j) {
    prefetch_stack(walk.order, i, e, start, prefetch_item);
    stack.run(walk.pd, walk.order.data(), i, e, j, [&](int64_t b) { return P.data() + (b - i) * width; });
    for (int64_t b = i; b < e; ++b) emit(walk.order[b], P.data() + (b - i) * width);
  });
}

void tt_stages_cpu(at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r, const at::Tensor& prefix_ids,
                   const at::Tensor& item_group, const at::Tensor& item_last, at::Tensor out, bool /*check_indices*/,
                   int64_t num_rows) {
  const char* op = "tt_stages";
  const TTShape s = check_tt_stages_args(op, cores, q, r, prefix_ids, item_group, item_last, out, "out", num_rows);
  const auto ids_c = prefix_ids.contiguous(), grp_c = item_group.contiguous(), last_c = item_last.contiguous();
  const int64_t G = ids_c.numel(), n = grp_c.numel();
  const int64_t *ids = ids_c.data_ptr<int64_t>(), *grp = grp_c.data_ptr<int64_t>(), *last = last_c.data_ptr<int64_t>();
  const int L = s.d - 1;
  check_range(op, "prefix_ids", ids, G, s.num_prefixes());
  check_range(op, "item_group", grp, n, G);
  check_range(op, "item_last", last, n, s.p[L]);
  check_item_rows(op, ids, grp, last, n, s.p[L], num_rows);
  const ItemsByGroup items(grp, n, G);
  const CoreView c = core_view(s, cores);
  const int64_t D = s.dim();
  float* o = out.data_ptr<float>();
  const PrefixWalk walk(s, ids, G);
  const Stage2Forward f(s, c);
  at::parallel_for(0, G, kStagesGrain, [&](int64_t lo, int64_t hi) {
    PrefixStack stack(s, c);
    Stage2Scratch w(f);
    std::vector<float> P(kStack * s.prefix_width());
    walk_stacks(s, walk, items.start, lo, hi, stack, P, [&](int64_t k) {
      const int64_t item = items.order[k];
      prefetch(last + item);
      prefetch(o + item * D);
    }, [&](int64_t x, const float* Px) {
      stage2_items(f, Px, items.start[x], items.start[x + 1], [&](int64_t k) { return items.order[k]; }, last, o, w);
    });
  });
}

// The largest number of items of one group (groups contiguous: start[g] .. start[g + 1]).
inline int64_t widest_group(const std::vector<int64_t>& start) {
  int64_t most = 0;
  for (size_t g = 0; g + 1 < start.size(); ++g) most = std::max(most, start[g + 1] - start[g]);
  return most;
}

// Item k's last digit is unique[k] - (its prefix id) * p_last: written for one prefix's items at a time, never for all.
inline void last_digits(const int64_t* uq, int64_t k0, int64_t n, int64_t prefix, int64_t p_last, int64_t* out) {
  for (int64_t t = 0; t < n; ++t) out[t] = uq[k0 + t] - prefix * p_last;
}

// The pooled forward (cpu_kernels.h): every item's row from stage 2's registers into a small per-prefix buffer,
// then added into the bag of each of its occurrences. Threads own chunks of the prefix walk (PrefixWalk), each
// adding into its own copy of out, the copies summed in chunk order (cpu_util.h: chunked_scatter_add_in). Per
// occurrence (EL-Rec's forward): stage 2 made once for every occurrence of an item, not once per item.

void tt_stages_pooled_cpu(at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r, const at::Tensor& unique,
                          const at::Tensor& prefix_ids, const at::Tensor& group_start,
                          const at::Tensor& count_offsets, const at::Tensor& occ_bags, at::Tensor out,
                          bool per_occurrence) {
  const TTShape s = parse_tt_shape("tt_stages_pooled", cores, q, r);
  const int64_t G = prefix_ids.numel(), B = out.size(0), D = s.dim(), p_last = s.p[s.d - 1];
  const int64_t* uq = unique.data_ptr<int64_t>();
  const int64_t* ids = prefix_ids.data_ptr<int64_t>();
  const int64_t* co = count_offsets.data_ptr<int64_t>();
  const int64_t* ob = occ_bags.data_ptr<int64_t>();
  const std::vector<int64_t> start(group_start.data_ptr<int64_t>(), group_start.data_ptr<int64_t>() + G + 1);
  if (G == 0) return;
  const CoreView c = core_view(s, cores);
  PrefixWalk walk(s, ids, G);
  const int64_t stage1_work = stage1_flops(s), item_work = stage2_flops(s);
  walk.balance(B * D, [&](int64_t x) {
    const int64_t occurrences = co[start[x + 1]] - co[start[x]];
    return stage1_work + (per_occurrence ? occurrences : start[x + 1] - start[x]) * item_work + occurrences * 2 * D;
  });
  const Stage2Forward f(s, c);
  // a group's most rows at a time: its items, or per occurrence a block of its occurrences
  const int64_t widest = std::max(widest_group(start), per_occurrence ? kOccurrenceBlock : 0);
  auto cut = [&](int64_t b) { return walk.run_start_after(b); };
  chunked_scatter_add_in(walk.chunks, G, B, D, out.data_ptr<float>(), cut, [&](int64_t lo, int64_t hi, float* bags) {
    PrefixStack stack(s, c);
    Stage2Scratch w(f);
    std::vector<float> P(kStack * s.prefix_width()), rows(widest * D);
    std::vector<int64_t> last(widest);
    walk_stacks(s, walk, start, lo, hi, stack, P, [&](int64_t k) { prefetch(ob + co[k]); },
                [&](int64_t x, const float* Px) {
      const int64_t k0 = start[x], k1 = start[x + 1], j0 = co[k0], j1 = co[k1];
      if (per_occurrence) {  // one row per occurrence j, in the bag of j, a block of occurrences at a time
        int64_t k = k0;
        for (int64_t b0 = j0; b0 < j1; b0 += kOccurrenceBlock) {
          const int64_t b1 = std::min(j1, b0 + kOccurrenceBlock);
          for (int64_t j = b0; j < b1; ++j) {
            while (co[k + 1] <= j) ++k;
            last[j - b0] = uq[k] - ids[x] * p_last;
          }
          stage2_items(f, Px, 0, b1 - b0, [](int64_t t) { return t; }, last.data(), rows.data(), w);
          for (int64_t j = b0; j < b1; ++j) {
            if (j + kScatterAhead < b1) prefetch_row(bags + ob[j + kScatterAhead] * D, D);
            add_row(bags + ob[j] * D, rows.data() + (j - b0) * D, D);
          }
        }
        return;
      }
      last_digits(uq, k0, k1 - k0, ids[x], p_last, last.data());
      stage2_items(f, Px, 0, k1 - k0, [](int64_t k) { return k; }, last.data(), rows.data(), w);
      // C-M: each row into the bag of every occurrence of its id (occurrences of consecutive ids are consecutive)
      int64_t j = j0;
      for (int64_t k = k0; k < k1; ++k) {
        const float* row = rows.data() + (k - k0) * D;
        for (const int64_t e = co[k + 1]; j < e; ++j) {
          if (j + kScatterAhead < j1) prefetch_row(bags + ob[j + kScatterAhead] * D, D);
          add_row(bags + ob[j] * D, row, D);
        }
      }
    });
  });
}

// One chunk's working memory: the stack's prefixes and their gradients, the stage-1 step's operands and dP_0.
struct BackwardScratch {
  PrefixStack stack;
  std::vector<float> P, dP, dP0, slice_t;  // slice_t: G_1[digit] transposed, for a long run
  int64_t slice_digit = -1;
  Stage2Rows items;
  StackRows rows;
  BackwardScratch(const TTShape& s, const CoreView& c)
      : stack(s, c), P(kStack * s.prefix_width()), dP(kStack * s.prefix_width()), dP0(kStack * s.core_width(0)),
        slice_t(s.d == 3 ? s.core_width(1) : 0), items(s), rows(s.q[0]) {}
};

// The item gradient rows of the backward walk (d <= 3): items(x0, n, scratch) gives the rows of the n items from
// item x0 on (D floats each, consecutive), lasts(x, k0, n, scratch) their last digits (x their prefix),
// prefetch(k) requests item k's first row.
//   DenseItems:  rows given, dE + k * D;
//   PooledItems: item k is unique id k of a batch, its row the sum of the bag gradients gy[occ_bags[j]] over its
//                occurrences j (count_offsets[k] .. count_offsets[k + 1]), in that order, gathered into the scratch.
struct DenseItems {
  const float* dE;
  const int64_t* last;
  int64_t D;
  const float* rows(int64_t k0, int64_t, float*) const { return dE + k0 * D; }
  const int64_t* lasts(int64_t, int64_t k0, int64_t, int64_t*) const { return last + k0; }
  int64_t gather_work(int64_t, int64_t) const { return 0; }
  void prefetch_item(int64_t k) const {
    prefetch(last + k);
    prefetch(dE + k * D);
    prefetch(dE + k * D + 16);
  }
};

struct PooledItems {
  const float* gy;
  const int64_t *co, *ob, *uq, *ids;  // ids: the prefix ids
  int64_t D, p_last;
  const int64_t* lasts(int64_t x, int64_t k0, int64_t n, int64_t* scratch) const {
    last_digits(uq, k0, n, ids[x], p_last, scratch);
    return scratch;
  }
  const float* rows(int64_t k0, int64_t n, float* scratch) const {
    const int64_t j1 = co[k0 + n];
    int64_t j = co[k0];
    for (int64_t k = k0; k < k0 + n; ++k) {
      float* dst = scratch + (k - k0) * D;
      std::fill(dst, dst + D, 0.f);
      for (const int64_t e = co[k + 1]; j < e; ++j) {
        if (j + kScatterAhead < j1) prefetch_row(gy + ob[j + kScatterAhead] * D, D);
        add_row(dst, gy + ob[j] * D, D);
      }
    }
    return scratch;
  }
  void prefetch_item(int64_t k) const { prefetch(ob + co[k]); }
  int64_t gather_work(int64_t k0, int64_t k1) const { return (co[k1] - co[k0]) * 2 * D; }  // items [k0, k1)
};

// tt_stages_backward's walk for d <= 3 over prefixes ids[0, G) and their items (groups contiguous, `start`), the
// item gradients from `items` (DenseItems / PooledItems: gather_work, what summing them costs, weighs the chunks);
// adds into grad_cores.
template <typename Items>
void stages_backward_walk(const TTShape& s, at::TensorList cores, const int64_t* ids, int64_t G,
                          const std::vector<int64_t>& start, const Items& items, at::TensorList grad_cores) {
  if (G == 0) return;
  const CoreView c = core_view(s, cores);
  const int L = s.d - 1;
  const int64_t M = s.Q(L - 1), qn = s.q[L], rk = s.r[L], width = s.prefix_width(), D = s.dim();
  const int64_t w0 = s.core_width(0), wl = s.core_width(L);
  // The last core transposed (stage2.h): dG_last is summed transposed, then added back.
  const std::vector<float> Gt = transposed_last_core(s, c);
  // Every chunk's copy: [dG_0 | dG_last transposed], padded to whole rows of kRow floats.
  constexpr int64_t kRow = 64;
  const int64_t last_at = s.p[0] * w0, total = last_at + s.p[L] * wl, rows = (total + kRow - 1) / kRow;
  std::vector<float> acc(rows * kRow, 0.f);
  // d = 3: prefixes by digit 1, whose runs share G_1[j] (the stacked step's B operand and dG_1 row).
  PrefixWalk walk(s, ids, G);
  const PrefixDigits& pd = walk.pd;
  const std::vector<int64_t>& order = walk.order;
  // Chunks of about equal work (a prefix's stage-1 work plus its items', and summing their gradients), cut at run
  // starts.
  const int64_t stage1_work = 6 * width * s.r[1], item_work = 4 * M * rk * qn;
  walk.balance(rows * kRow, [&](int64_t x) {
    return stage1_work + (start[x + 1] - start[x]) * item_work + items.gather_work(start[x], start[x + 1]);
  });
  const int64_t widest = widest_group(start);
  float* dG1 = s.d == 3 ? grad_cores[1].data_ptr<float>() : nullptr;
  auto cut = [&](int64_t b) { return walk.run_start_after(b); };
  chunked_scatter_add_in(walk.chunks, G, rows, kRow, acc.data(), cut, [&](int64_t lo, int64_t hi, float* buf) {
    BackwardScratch w(s, c);
    const bool pooled = std::is_same_v<Items, PooledItems>;
    std::vector<float> item_rows(pooled ? widest * D : 0);
    std::vector<int64_t> item_lasts(pooled ? widest : 0);
    float* dG0 = buf;
    float* dGlt = buf + last_at;
    for (int64_t i = lo; i < hi;) {
      const int64_t j = walk.key(i);
      int64_t e = i + 1;
      while (e < hi && e - i < kStack && walk.key(e) == j) ++e;
      prefetch_stack(order, i, e, start, [&](int64_t k) { items.prefetch_item(k); });
      w.stack.run(pd, order.data(), i, e, j, [&](int64_t b) { return w.P.data() + (b - i) * width; });
      for (int64_t b = i; b < e; ++b) {  // stage 2 backward of the stack's items
        const int64_t x = order[b], k0 = start[x], nk = start[x + 1] - k0;
        stage2_items_backward(s, Gt.data(), w.P.data() + (b - i) * width, items.rows(k0, nk, item_rows.data()),
                              items.lasts(x, k0, nk, item_lasts.data()), nk, w.dP.data() + (b - i) * width, dGlt,
                              w.items);
      }
      if (s.d == 2) {  // the prefix is core 0's slice: dP is its gradient
        for (int64_t b = i; b < e; ++b) add_row(dG0 + ids[order[b]] * w0, w.dP.data() + (b - i) * width, w0);
      } else {  // the stacked stage-1 step: dG_1[j] += [P_0; ..]^T [dP; ..], dP_0 = dP G_1[j]^T into dG_0
        for (int64_t b = i; b < e; ++b)
          w.rows.set(b - i, c.row(0, pd.of(order[b])[0]), s.r[1], w.dP.data() + (b - i) * width, s.q[1] * s.r[2]);
        const float* slice_t = nullptr;
        if (e - i >= kLongRun) {
          if (w.slice_digit != j) gemm::transpose(s.r[1], s.q[1] * s.r[2], c.row(1, j), w.slice_t.data());
          w.slice_digit = j;
          slice_t = w.slice_t.data();
        }
        stacked_step(s, c, 1, j, e - i, w.rows, dG1, w.dP0.data(), slice_t);
        for (int64_t b = i; b < e; ++b) add_row(dG0 + pd.of(order[b])[0] * w0, w.dP0.data() + (b - i) * w0, w0);
      }
      i = e;
    }
  });
  float* g0 = grad_cores[0].data_ptr<float>();
  at::parallel_for(0, s.p[0], 64, [&](int64_t lo, int64_t hi) {
    for (int64_t x = lo; x < hi; ++x) add_row(g0 + x * w0, acc.data() + x * w0, w0);
  });
  add_transposed(s, acc.data() + last_at, grad_cores[L].data_ptr<float>());
}

void tt_stages_backward_cpu(at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r,
                            const at::Tensor& prefix_ids, const at::Tensor& item_group, const at::Tensor& item_last,
                            const at::Tensor& grad_items, at::TensorList grad_cores, bool check_indices,
                            int64_t num_rows) {
  const char* op = "tt_stages_backward";
  const TTShape s = check_tt_stages_args(op, cores, q, r, prefix_ids, item_group, item_last, grad_items,
                                         "grad_items", num_rows);
  check_all_core_grads(op, s, cores, grad_cores);
  if (s.d > 3) {  // the walk re-sorts the prefixes per core: the separate stage ops
    tt_stages_backward_composed(cores, q, r, prefix_ids, item_group, item_last, grad_items, grad_cores, check_indices,
                                num_rows);
    return;
  }
  const auto ids_c = prefix_ids.contiguous(), grp_c = item_group.contiguous(), last_c = item_last.contiguous();
  const auto dE_c = grad_items.contiguous();
  const int64_t G = ids_c.numel(), n = grp_c.numel();
  const int64_t *ids = ids_c.data_ptr<int64_t>(), *grp = grp_c.data_ptr<int64_t>(), *last = last_c.data_ptr<int64_t>();
  check_range(op, "prefix_ids", ids, G, s.num_prefixes());
  check_range(op, "item_last", last, n, s.p[s.d - 1]);
  const std::vector<int64_t> start = group_starts(op, grp, n, G);
  check_item_rows(op, ids, grp, last, n, s.p[s.d - 1], num_rows);
  stages_backward_walk(s, cores, ids, G, start, DenseItems{dE_c.data_ptr<float>(), last, s.dim()}, grad_cores);
}

// The pooled backward (cpu_kernels.h): each item's gradient row summed from its occurrences' bag gradients as the
// walk reaches its prefix (PooledItems); for d = 4 (whose walk is the separate stage ops) summed into a buffer first,
// beside each item's group and last digit.
void tt_stages_backward_pooled_cpu(at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r,
                                   const at::Tensor& unique, const at::Tensor& prefix_ids,
                                   const at::Tensor& group_start, const at::Tensor& count_offsets,
                                   const at::Tensor& occ_bags, const at::Tensor& grad, at::TensorList grad_cores) {
  const TTShape s = parse_tt_shape("tt_stages_backward_pooled", cores, q, r);
  const int64_t G = prefix_ids.numel(), n = unique.numel(), D = s.dim(), p_last = s.p[s.d - 1];
  const int64_t* ids = prefix_ids.data_ptr<int64_t>();
  const std::vector<int64_t> start(group_start.data_ptr<int64_t>(), group_start.data_ptr<int64_t>() + G + 1);
  const PooledItems items{grad.data_ptr<float>(), count_offsets.data_ptr<int64_t>(), occ_bags.data_ptr<int64_t>(),
                          unique.data_ptr<int64_t>(), ids, D, p_last};
  if (s.d > 3) {
    auto dE = at::empty({n, D}, grad.options());
    auto item_group = at::empty({n}, unique.options()), item_last = at::empty({n}, unique.options());
    float* rows = dE.data_ptr<float>();
    int64_t *grp = item_group.data_ptr<int64_t>(), *last = item_last.data_ptr<int64_t>();
    at::parallel_for(0, G, 64, [&](int64_t x0, int64_t x1) {
      for (int64_t x = x0; x < x1; ++x) {
        const int64_t k0 = start[x], nk = start[x + 1] - k0;
        items.rows(k0, nk, rows + k0 * D);
        items.lasts(x, k0, nk, last + k0);
        std::fill(grp + k0, grp + k0 + nk, x);
      }
    });
    tt_stages_backward_composed(cores, q, r, prefix_ids, item_group, item_last, dE, grad_cores, false, -1);
    return;
  }
  stages_backward_walk(s, cores, ids, G, start, items, grad_cores);
}

}  // namespace DLRMBENCH_ISA_NS

}  // namespace dlrmbench
