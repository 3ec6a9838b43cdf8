// The stable LSD radix sort of 64-bit words that jagged_unique and EcoRec's step sort their ids with: as few
// passes as the key's width needs, of equal digits of <= 12 bits (at most 4096 buckets: a 24-bit id sorts in two
// passes, not three; a pass costs about the same either way, its time being the scatter's stores), each pass split
// over threads with per-chunk histograms laid out bucket-major, so the result (a stable sort has one) never
// depends on the chunking. Each pass's scatter counts the next pass's histograms as it places the words: only the
// first pass reads its words for the counts alone.
#pragma once

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "cpu_util.h"

namespace dlrmbench {

inline constexpr int kMaxDigitBits = 12;  // at most 4096 buckets per pass

// Stable LSD radix sort of w[0..n) by bits [shift0, shift0 + bits) of each word, carrying pay[0..n) along when
// it is given (tmp, tmp_pay: scratch of n). As few passes as the width needs, of equal digits. `chunks` > 1
// splits each pass over threads (per-chunk histograms, bucket-major offsets: the same stable result). The sorted
// words (and payload) end in w or in tmp, as the number of passes says: returns the one that holds them.
inline std::pair<uint64_t*, int64_t*> radix_sort_in_place_or_tmp(int64_t n, int shift0, int bits, int64_t chunks,
                                                                 uint64_t* w, uint64_t* tmp, int64_t* pay,
                                                                 int64_t* tmp_pay) {
  const int passes = (bits + kMaxDigitBits - 1) / kMaxDigitBits;
  if (passes == 0) return {w, pay};
  if (pay == nullptr) tmp_pay = nullptr;  // no payload: none in either buffer
  const int digit = (bits + passes - 1) / passes;
  const int64_t B = int64_t{1} << digit;
  const int64_t per = (n + chunks - 1) / chunks;
  const DivideBy chunk_of(std::max<int64_t>(per, 1));
  // hist: chunk c's count, then its next slot, of each bucket in this pass; next: the next pass's counts, made by
  // this pass's scatter (where a word lands says its chunk there), per (chunk it leaves, chunk it lands in, bucket)
  // so no two threads count into one entry. Only the first pass reads its words for the counts alone.
  std::vector<int64_t> hist(chunks * B), next(passes > 1 ? chunks * chunks * B : 0);
  uint64_t *src = w, *dst = tmp;
  int64_t *src_p = pay, *dst_p = tmp_pay;
  for (int pass = 0; pass < passes; ++pass) {
    const int shift = shift0 + pass * digit;
    if (pass == 0) {
      at::parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) {
        for (int64_t c = c0; c < c1; ++c) {
          int64_t* h = hist.data() + c * B;
          for (int64_t i = c * per, e = std::min(n, (c + 1) * per); i < e; ++i) ++h[(src[i] >> shift) & (B - 1)];
        }
      });
    } else {
      for (int64_t c = 0; c < chunks; ++c)
        for (int64_t b = 0; b < B; ++b) {
          int64_t k = 0;
          for (int64_t from = 0; from < chunks; ++from) k += next[(from * chunks + c) * B + b];
          hist[c * B + b] = k;
        }
    }
    int64_t sum = 0;  // bucket-major, chunk-minor: every chunk writes its share of a bucket in order (stable)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t c = 0; c < chunks; ++c) {
        const int64_t k = hist[c * B + b];
        hist[c * B + b] = sum;
        sum += k;
      }
    const bool count_next = pass + 1 < passes;
    std::fill(next.begin(), next.end(), 0);
    at::parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        int64_t* h = hist.data() + c * B;
        int64_t* nx = next.data() + c * chunks * B;
        for (int64_t i = c * per, e = std::min(n, (c + 1) * per); i < e; ++i) {
          const uint64_t word = src[i];
          const int64_t d = h[(word >> shift) & (B - 1)]++;
          dst[d] = word;
          if (src_p) dst_p[d] = src_p[i];
          if (count_next) ++nx[chunk_of(d) * B + ((word >> (shift + digit)) & (B - 1))];
        }
      }
    });
    std::swap(src, dst);
    std::swap(src_p, dst_p);
  }
  return {src, src_p};
}

// radix_sort_in_place_or_tmp with the result always in w (and pay).
inline void radix_sort(int64_t n, int shift0, int bits, int64_t chunks, uint64_t* w, uint64_t* tmp, int64_t* pay,
                       int64_t* tmp_pay) {
  const auto [src, src_p] = radix_sort_in_place_or_tmp(n, shift0, bits, chunks, w, tmp, pay, tmp_pay);
  if (src != w) {
    std::copy(src, src + n, w);
    if (pay) std::copy(src_p, src_p + n, pay);
  }
}

}  // namespace dlrmbench
