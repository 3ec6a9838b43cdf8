// CPU kernel of dlrmbench::jagged_unique (schema in ../ops.cpp): per table a stable LSD radix sort of the ids
// (offset by the table's smallest id, so only the bits its id range needs are sorted; id and position packed
// in one word when they fit, in as few passes of <= 10-bit digits as the range needs), then a parallel fill of
// the outputs from the sorted ids. Big tables sort one at a time with every thread (per-chunk histograms;
// a stable sort has one answer, so the chunking never shows); the small ones one per thread.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "../op_args.h"
#include "radix_sort.h"

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <vector>

namespace dlrmbench {
namespace {

constexpr int64_t kBigTable = 1 << 16;  // ids; below this a table sorts on one thread

// Sort table [start, end): sp[start..end) = its positions ordered by (id, position), sv[start..end) = the ids in
// that order. The key (id - the table's smallest) and the position pack into one word when they fit (the
// position's low bits make the sort stable and travel with the key), else the positions ride along.
void sort_table(const int64_t* v, int64_t start, int64_t end, int64_t chunks, int64_t* sp, int64_t* sv) {
  const int64_t n = end - start;
  if (n == 0) return;
  const auto mm = std::minmax_element(v + start, v + end);
  const int64_t lo = *mm.first;
  const uint64_t range = static_cast<uint64_t>(*mm.second) - static_cast<uint64_t>(lo);
  const int bits = range == 0 ? 0 : 64 - __builtin_clzll(range);
  const int pbits = n == 1 ? 0 : 64 - __builtin_clzll(static_cast<uint64_t>(n - 1));
  const int64_t per = (n + chunks - 1) / chunks;
  auto each = [&](auto fn) {
    at::parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t i = c0 * per, e = std::min(n, c1 * per); i < e; ++i) fn(i);
    });
  };
  std::vector<uint64_t> words(n), tmp(n);
  if (bits + pbits <= 64) {
    const uint64_t mask = pbits == 64 ? ~uint64_t{0} : (uint64_t{1} << pbits) - 1;
    each([&](int64_t i) { words[i] = ((static_cast<uint64_t>(v[start + i]) - static_cast<uint64_t>(lo)) << pbits) | i; });
    radix_sort(n, pbits, bits, chunks, words.data(), tmp.data(), nullptr, nullptr);
    each([&](int64_t k) {
      sp[start + k] = start + static_cast<int64_t>(words[k] & mask);
      sv[start + k] = static_cast<int64_t>((words[k] >> pbits) + static_cast<uint64_t>(lo));
    });
    return;
  }
  std::vector<int64_t> tmp_pos(n);
  each([&](int64_t i) {
    words[i] = static_cast<uint64_t>(v[start + i]) - static_cast<uint64_t>(lo);
    sp[start + i] = start + i;
  });
  radix_sort(n, 0, bits, chunks, words.data(), tmp.data(), sp + start, tmp_pos.data());
  each([&](int64_t k) { sv[start + k] = static_cast<int64_t>(words[k] + static_cast<uint64_t>(lo)); });
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> jagged_unique_cpu(
    const at::Tensor& values, const at::Tensor& offsets, int64_t num_tables, int64_t batch_size) {
  check_jagged_unique_args(values, offsets, num_tables, batch_size);
  const auto v_c = values.contiguous();
  const auto o_c = offsets.contiguous();
  const int64_t* v = v_c.data_ptr<int64_t>();
  const int64_t* o = o_c.data_ptr<int64_t>();
  const int64_t nnz = values.numel();
  std::vector<int64_t> bounds(num_tables + 1);  // the table boundaries (bags inside a table are not read)
  for (int64_t t = 0; t <= num_tables; ++t) bounds[t] = o[t * batch_size];
  check_table_bounds(bounds.data(), num_tables, nnz);
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
  std::vector<int64_t> sorted_ids(nnz);  // the ids in sorted order, so pass 2 reads no id through a position
  int64_t* sv = sorted_ids.data();
  auto first_of = [&](int64_t t) { return o[t * batch_size]; };
  const int64_t threads = at::get_num_threads();
  for (int64_t t = 0; t < num_tables; ++t)
    if (first_of(t + 1) - first_of(t) >= kBigTable) sort_table(v, first_of(t), first_of(t + 1), threads, sp, sv);
  at::parallel_for(0, num_tables, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t)
      if (first_of(t + 1) - first_of(t) < kBigTable) sort_table(v, first_of(t), first_of(t + 1), 1, sp, sv);
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
  auto new_id = [&](int64_t t, int64_t k) { return k == first_of(t) || sv[k] != sv[k - 1]; };
  at::parallel_for(0, static_cast<int64_t>(pieces.size()), 1, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      int64_t n = 0;  // in a register: neighbouring pieces share a cache line
      for (int64_t k = pieces[i].lo; k < pieces[i].hi; ++k) n += new_id(pieces[i].table, k);
      pieces[i].starts = n;
    }
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
          uq[++u] = sv[k];
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
