// The stable LSD radix sort of 64-bit words that jagged_unique and EcoRec's step sort their ids with: as few
// passes as the key's width needs, of equal digits of <= 10 bits (at most 1024 buckets: the histograms and write
// streams stay cached), each pass split over threads with per-chunk histograms laid out bucket-major, so the
// result (a stable sort has one) never depends on the chunking.
#pragma once

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace dlrmbench {

inline constexpr int kMaxDigitBits = 10;  // at most 1024 buckets per pass

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
  std::vector<int64_t> hist(chunks * B);
  uint64_t *src = w, *dst = tmp;
  int64_t *src_p = pay, *dst_p = tmp_pay;
  for (int pass = 0; pass < passes; ++pass) {
    const int shift = shift0 + pass * digit;
    std::fill(hist.begin(), hist.end(), 0);
    at::parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        int64_t* h = hist.data() + c * B;
        for (int64_t i = c * per, e = std::min(n, (c + 1) * per); i < e; ++i) ++h[(src[i] >> shift) & (B - 1)];
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
          const int64_t d = h[(src[i] >> shift) & (B - 1)]++;
          dst[d] = src[i];
          if (src_p) dst_p[d] = src_p[i];
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
