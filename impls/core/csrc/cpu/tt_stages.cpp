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
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>

#include <algorithm>
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
constexpr int64_t kChunks = 8;  // the backward's chunks at most (each with its own dG_0 and dG_last copy)

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
  const int64_t width = s.prefix_width(), D = s.dim();
  float* o = out.data_ptr<float>();
  const PrefixDigits pd(s, ids, G);
  const std::vector<int64_t> order = order_by_last_prefix_digit(s, pd, G);
  const Stage2Forward f(s, c);
  at::parallel_for(0, G, kStagesGrain, [&](int64_t lo, int64_t hi) {
    PrefixStack stack(s, c);
    Stage2Scratch w(f);
    std::vector<float> P(kStack * width);
    for_each_run(order, lo, hi, [&](int64_t x) { return pd.last(x); }, [&](int64_t i, int64_t e, int64_t j) {
      prefetch_stack(order, i, e, items.start, [&](int64_t k) {
        const int64_t item = items.order[k];
        prefetch(last + item);
        prefetch(o + item * D);
      });
      stack.run(pd, order.data(), i, e, j, [&](int64_t b) { return P.data() + (b - i) * width; });
      for (int64_t b = i; b < e; ++b) {
        const int64_t x = order[b];
        stage2_items(f, P.data() + (b - i) * width, items.start[x], items.start[x + 1],
                     [&](int64_t k) { return items.order[k]; }, last, o, w);
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
  const int L = s.d - 1;
  check_range(op, "prefix_ids", ids, G, s.num_prefixes());
  check_range(op, "item_last", last, n, s.p[L]);
  const std::vector<int64_t> start = group_starts(op, grp, n, G);
  check_item_rows(op, ids, grp, last, n, s.p[L], num_rows);
  if (G == 0) return;
  const CoreView c = core_view(s, cores);
  const int64_t M = s.Q(L - 1), qn = s.q[L], rk = s.r[L], width = s.prefix_width(), D = s.dim();
  const int64_t w0 = s.core_width(0), wl = s.core_width(L);
  const float* dE = dE_c.data_ptr<float>();
  // The last core transposed (stage2.h): dG_last is summed transposed, then added back.
  const std::vector<float> Gt = transposed_last_core(s, c);
  // Every chunk's copy: [dG_0 | dG_last transposed], padded to whole rows of kRow floats.
  constexpr int64_t kRow = 64;
  const int64_t last_at = s.p[0] * w0, total = last_at + s.p[L] * wl, rows = (total + kRow - 1) / kRow;
  std::vector<float> acc(rows * kRow, 0.f);
  // d = 3: prefixes by digit 1, whose runs share G_1[j] (the stacked step's B operand and dG_1 row).
  const PrefixDigits pd(s, ids, G);
  const std::vector<int64_t> order = order_by_last_prefix_digit(s, pd, G);
  auto key = [&](int64_t b) { return pd.last(order[b]); };
  // Chunks of about equal work (a prefix's stage-1 work plus its items'), cut at run starts: a fixed number
  // (kChunks, fewer for a small call) so the per-chunk copies stay a small part of the work.
  const int64_t stage1_work = 6 * width * s.r[1], item_work = 4 * M * rk * qn;
  std::vector<int64_t> cum(G + 1, 0);
  for (int64_t b = 0; b < G; ++b) {
    const int64_t x = order[b];
    cum[b + 1] = cum[b] + stage1_work + (start[x + 1] - start[x]) * item_work;
  }
  auto balanced_run_start = [&](int64_t b) {  // b = c * ceil(G / chunks): the position where work c/chunks ends
    const double target = static_cast<double>(cum[G]) * static_cast<double>(b) / static_cast<double>(G);
    b = std::lower_bound(cum.begin(), cum.end(), static_cast<int64_t>(target)) - cum.begin();
    while (b > 0 && b < G && key(b) == key(b - 1)) ++b;
    return b;
  };
  const int64_t chunks = std::min<int64_t>(kChunks, 1 + cum[G] / (64 * rows * kRow));
  float* dG1 = s.d == 3 ? grad_cores[1].data_ptr<float>() : nullptr;
  chunked_scatter_add_in(chunks, G, rows, kRow, acc.data(), balanced_run_start, [&](int64_t lo, int64_t hi, float* buf) {
    BackwardScratch w(s, c);
    float* dG0 = buf;
    float* dGlt = buf + last_at;
    for (int64_t i = lo; i < hi;) {
      const int64_t j = key(i);
      int64_t e = i + 1;
      while (e < hi && e - i < kStack && key(e) == j) ++e;
      prefetch_stack(order, i, e, start, [&](int64_t k) {
        prefetch(last + k);
        prefetch(dE + k * D);
        prefetch(dE + k * D + 16);
      });
      w.stack.run(pd, order.data(), i, e, j, [&](int64_t b) { return w.P.data() + (b - i) * width; });
      for (int64_t b = i; b < e; ++b) {  // stage 2 backward of the stack's items
        const int64_t x = order[b];
        stage2_items_backward(s, Gt.data(), w.P.data() + (b - i) * width, dE, last, start[x], start[x + 1],
                              w.dP.data() + (b - i) * width, dGlt, w.items);
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

}  // namespace DLRMBENCH_ISA_NS

}  // namespace dlrmbench
