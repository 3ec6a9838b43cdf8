// CPU kernel of dlrmbench::jagged_unique (schema in ../ops.cpp): per table a stable LSD radix sort of the ids
// (offset by the table's smallest id, so only the bits its id range needs are sorted) carrying positions,
// then a parallel fill of the outputs. Big tables sort one at a time with every thread (per-chunk histograms;
// a stable sort has one answer, so the chunking never shows); the small ones one per thread.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "../op_args.h"

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <vector>

namespace dlrmbench {
namespace {

constexpr int kRadixBits = 11;  // 2048 buckets: a pass's histograms stay in L1/L2
constexpr int64_t kBigTable = 1 << 16;  // ids; below this a table sorts on one thread

// Sort order[0..n) (positions) stably by v[position] - lo, where every such key is < 2^bits, into `order`.
// `keys` / `tmp_keys` / `tmp_order` are scratch of n entries. `chunks` > 1 splits each pass over threads.
void radix_sort_positions(const int64_t* v, int64_t lo, int bits, int64_t n, int64_t chunks, int64_t* order,
                          uint64_t* keys, uint64_t* tmp_keys, int64_t* tmp_order) {
  constexpr int64_t B = int64_t{1} << kRadixBits;
  const int64_t per = (n + chunks - 1) / chunks;
  at::parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t i = c0 * per, e = std::min(n, c1 * per); i < e; ++i)
      keys[i] = static_cast<uint64_t>(v[order[i]]) - static_cast<uint64_t>(lo);
  });
  std::vector<int64_t> hist(chunks * B);
  uint64_t *src_k = keys, *dst_k = tmp_keys;
  int64_t *src_o = order, *dst_o = tmp_order;
  for (int shift = 0; shift < bits; shift += kRadixBits) {
    std::fill(hist.begin(), hist.end(), 0);
    at::parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        int64_t* h = hist.data() + c * B;
        for (int64_t i = c * per, e = std::min(n, (c + 1) * per); i < e; ++i) ++h[(src_k[i] >> shift) & (B - 1)];
      }
    });
    int64_t sum = 0;  // bucket-major, chunk-minor: every chunk writes its share of a bucket in order (stable)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t c = 0; c < chunks; ++c) {
        const int64_t k = hist[c * B + b];
        hist[c * B + b] = sum;
        sum += k;
      }
    at::parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        int64_t* h = hist.data() + c * B;
        for (int64_t i = c * per, e = std::min(n, (c + 1) * per); i < e; ++i) {
          const int64_t d = h[(src_k[i] >> shift) & (B - 1)]++;
          dst_k[d] = src_k[i];
          dst_o[d] = src_o[i];
        }
      }
    });
    std::swap(src_k, dst_k);
    std::swap(src_o, dst_o);
  }
  if (src_o != order) std::copy(src_o, src_o + n, order);
}

// Sort table [start, end): sp[start..end) = its positions ordered by (id, position).
void sort_table(const int64_t* v, int64_t start, int64_t end, int64_t chunks, int64_t* sp) {
  const int64_t n = end - start;
  if (n == 0) return;
  int64_t* order = sp + start;
  for (int64_t k = 0; k < n; ++k) order[k] = start + k;
  const auto mm = std::minmax_element(v + start, v + end);
  const uint64_t range = static_cast<uint64_t>(*mm.second) - static_cast<uint64_t>(*mm.first);
  const int bits = range == 0 ? 0 : 64 - __builtin_clzll(range);
  if (bits == 0) return;
  std::vector<uint64_t> keys(n), tmp_keys(n);
  std::vector<int64_t> tmp_order(n);
  radix_sort_positions(v, *mm.first, bits, n, chunks, order, keys.data(), tmp_keys.data(), tmp_order.data());
}

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

  // Pass 1: sort each table's positions by (id, position). Big tables one at a time with every thread on
  // each radix pass, small ones one per thread. A stable sort has one answer: the chunking (thread count)
  // never changes it.
  auto first_of = [&](int64_t t) { return o[t * batch_size]; };
  const int64_t threads = at::get_num_threads();
  for (int64_t t = 0; t < num_tables; ++t)
    if (first_of(t + 1) - first_of(t) >= kBigTable) sort_table(v, first_of(t), first_of(t + 1), threads, sp);
  at::parallel_for(0, num_tables, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t)
      if (first_of(t + 1) - first_of(t) < kBigTable) sort_table(v, first_of(t), first_of(t + 1), 1, sp);
  });

  // Pass 2, over (table, chunk) pieces of the sorted order, in parallel: count where a new id starts, then
  // number the unique ids (a table's after the previous tables'), write unique ids, each one's first sorted
  // position, and the inverse. Counts are the gaps between first positions.
  struct Piece {
    int64_t table, lo, hi, starts = 0;
  };
  std::vector<Piece> pieces;
  for (int64_t t = 0; t < num_tables; ++t) {
    const int64_t lo = first_of(t), n = first_of(t + 1) - lo;
    const int64_t c = n >= kBigTable ? threads : 1, per = (n + c - 1) / std::max<int64_t>(c, 1);
    for (int64_t k = 0; k < c && k * per < n; ++k) pieces.push_back({t, lo + k * per, std::min(lo + n, lo + (k + 1) * per)});
  }
  auto new_id = [&](int64_t t, int64_t k) { return k == first_of(t) || v[sp[k]] != v[sp[k - 1]]; };
  at::parallel_for(0, static_cast<int64_t>(pieces.size()), 1, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i)
      for (int64_t k = pieces[i].lo; k < pieces[i].hi; ++k) pieces[i].starts += new_id(pieces[i].table, k);
  });
  std::vector<int64_t> piece_base(pieces.size());
  std::fill(toff, toff + num_tables + 1, 0);
  int64_t U = 0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    piece_base[i] = U;
    U += pieces[i].starts;
    toff[pieces[i].table + 1] = U;
  }
  for (int64_t t = 0; t < num_tables; ++t) toff[t + 1] = std::max(toff[t + 1], toff[t]);  // empty tables

  auto unique = at::empty({U}, opts);
  auto counts = at::empty({U}, opts);
  int64_t* uq = unique.data_ptr<int64_t>();
  int64_t* cnt = counts.data_ptr<int64_t>();
  std::vector<int64_t> first(U + 1, nnz);
  at::parallel_for(0, static_cast<int64_t>(pieces.size()), 1, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      int64_t u = piece_base[i] - 1;  // the id running into this piece (its number is below the piece's)
      for (int64_t k = pieces[i].lo; k < pieces[i].hi; ++k) {
        const int64_t p = sp[k];
        if (new_id(pieces[i].table, k)) {
          uq[++u] = v[p];
          first[u] = k;
        }
        inv[p] = u;
      }
    }
  });
  at::parallel_for(0, U, 4096, [&](int64_t lo, int64_t hi) {
    for (int64_t u = lo; u < hi; ++u) cnt[u] = first[u + 1] - first[u];
  });
  return {unique, table_offsets, inverse, counts, sorted_positions};
}

}  // namespace

TORCH_LIBRARY_IMPL(dlrmbench, CPU, m) { m.impl("jagged_unique", &jagged_unique_cpu); }

}  // namespace dlrmbench
