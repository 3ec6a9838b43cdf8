// sort_occurrences and prefix_groups (ecorec_index.h). sort_occurrences: Every occurrence becomes one word, its id above its bag (or the id alone with the
// bag carried beside it when the two may not fit in 64 bits), and a stable radix sort on the bits of the largest id
// only orders them by (id, position): the input is in position order. Then, over thread chunks of
// the sorted order, one pass counts where a new id starts, and a second numbers the unique ids and writes their
// ids, first occurrences and the bag of each occurrence (the same for any thread count).
#include "ecorec_index.h"

#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "cpu_util.h"
#include "radix_sort.h"

namespace dlrmbench {
namespace {

constexpr int64_t kMinChunk = 1 << 14;  // occurrences; a smaller batch sorts and scans on one thread

int bit_width(uint64_t x) { return x == 0 ? 0 : 64 - __builtin_clzll(x); }

}  // namespace

OccurrenceIndex sort_occurrences(const int64_t* v, const int64_t* off, int64_t B, int64_t nnz, int64_t limit,
                                 const at::TensorOptions& opts) {
  OccurrenceIndex ix;
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(at::get_num_threads(), nnz / kMinChunk));
  const int64_t per = std::max<int64_t>(1, (nnz + chunks - 1) / chunks);
  auto over_chunks = [&](auto fn) {  // fn(c, first, end) for chunk c of the sorted order
    at::parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) fn(c, std::min(nnz, c * per), std::min(nnz, (c + 1) * per));
    });
  };
  // One pass writes the words and finds the smallest and largest id (the words are packed on the bound the ids
  // must keep, and thrown away if one does not keep it).
  const int bag_bits = bit_width(static_cast<uint64_t>(std::max<int64_t>(B - 1, 0)));
  const bool packed = bit_width(static_cast<uint64_t>(std::max<int64_t>(limit - 1, 0))) + bag_bits <= 64;
  const int shift = packed ? bag_bits : 0;
  const uint64_t bag_mask = bag_bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bag_bits) - 1;

  // scratch written before it is read, reused from call to call (cpu_util.h: Reused)
  struct WordsTag;
  struct TmpTag;
  const Reused<uint64_t, WordsTag> words_buf(nnz);
  const Reused<uint64_t, TmpTag> tmp_buf(nnz);
  std::unique_ptr<int64_t[]> bags_buf(new int64_t[packed ? 0 : nnz]), tmp_bags(new int64_t[packed ? 0 : nnz]);
  uint64_t* words_in = words_buf.get();
  int64_t* bags_in = bags_buf.get();
  const int64_t bag_chunks = std::max<int64_t>(1, std::min<int64_t>(at::get_num_threads(), B / 256));
  const int64_t bags_per = (B + bag_chunks - 1) / bag_chunks;
  std::vector<int64_t> lows(bag_chunks, INT64_MAX), highs(bag_chunks, INT64_MIN);
  at::parallel_for(0, bag_chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      int64_t a = INT64_MAX, z = INT64_MIN;  // in registers: the chunks' entries share a cache line
      for (int64_t b = c * bags_per, b1 = std::min(B, (c + 1) * bags_per); b < b1; ++b)
        for (int64_t j = off[b]; j < off[b + 1]; ++j) {
          a = std::min(a, v[j]);
          z = std::max(z, v[j]);
          const uint64_t key = static_cast<uint64_t>(v[j]);
          words_in[j] = packed ? (key << shift) | static_cast<uint64_t>(b) : key;
          if (!packed) bags_in[j] = b;
        }
      lows[c] = a;
      highs[c] = z;
    }
  });
  const int64_t lo = nnz ? *std::min_element(lows.begin(), lows.end()) : 0;
  const int64_t hi = nnz ? *std::max_element(highs.begin(), highs.end()) : 0;
  if (nnz > 0 && (lo < 0 || hi >= limit)) {
    ix.in_range = false;
    return ix;
  }
  const int bits = bit_width(static_cast<uint64_t>(hi));
  const auto sorted = radix_sort_in_place_or_tmp(nnz, shift, bits, chunks, words_in, tmp_buf.get(),
                                                 packed ? nullptr : bags_in, tmp_bags.get());
  const uint64_t* words = sorted.first;
  const int64_t* bags = sorted.second;
  auto key_of = [&](int64_t j) { return words[j] >> shift; };
  auto bag_of = [&](int64_t j) { return packed ? static_cast<int64_t>(words[j] & bag_mask) : bags[j]; };

  // pass 1: new ids per chunk
  std::vector<int64_t> starts(chunks, 0);
  over_chunks([&](int64_t c, int64_t j0, int64_t j1) {
    int64_t n = 0;
    for (int64_t j = j0; j < j1; ++j) n += j == 0 || key_of(j) != key_of(j - 1);
    starts[c] = n;
  });
  std::vector<int64_t> base(chunks + 1, 0);
  for (int64_t c = 0; c < chunks; ++c) base[c + 1] = base[c] + starts[c];
  const int64_t U = base[chunks];
  ix.unique = at::empty({U}, opts);
  ix.count_offsets = at::empty({U + 1}, opts);
  ix.occ_bags = at::empty({nnz}, opts);
  int64_t* uq = ix.unique.data_ptr<int64_t>();
  int64_t* co = ix.count_offsets.data_ptr<int64_t>();
  int64_t* ob = ix.occ_bags.data_ptr<int64_t>();
  // pass 2: number the unique ids, write them, their first occurrences and the occurrences' bags
  over_chunks([&](int64_t c, int64_t j0, int64_t j1) {
    int64_t u = base[c] - 1;  // the id running into this chunk
    for (int64_t j = j0; j < j1; ++j) {
      if (j == 0 || key_of(j) != key_of(j - 1)) {
        uq[++u] = static_cast<int64_t>(key_of(j));
        co[u] = j;
      }
      ob[j] = bag_of(j);
    }
  });
  co[U] = nnz;
  return ix;
}

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

}  // namespace dlrmbench
