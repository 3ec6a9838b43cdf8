// CPU kernel of dlrmbench::transpose_segments (schema in ../ops.cpp): a buffer of G x S segments laid out
// (g, s) - G sources' payloads back to back, each S segments long - copied into (s, g) order: segment by segment,
// one memcpy each, in parallel over the output's s-blocks (each writes its own contiguous range).
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

#include <cstdint>
#include <algorithm>
#include <cstring>
#include <vector>

#include "../op_args.h"

namespace dlrmbench {
namespace {

at::Tensor transpose_segments_cpu(const at::Tensor& values, const at::Tensor& lengths) {
  const char* op = "transpose_segments";
  check_transpose_segments_args(op, values, lengths);
  const int64_t G = lengths.size(0), S = lengths.size(1);
  const auto len_c = lengths.contiguous();
  const auto v_c = values.contiguous();
  const int64_t* len = len_c.data_ptr<int64_t>();
  std::vector<int64_t> src(G * S + 1, 0), dst(S + 1, 0);  // src: (g, s) starts; dst: s-block starts
  for (int64_t i = 0; i < G * S; ++i) {
    TORCH_CHECK_VALUE(len[i] >= 0, op, ": lengths[", i / S, ", ", i % S, "] = ", len[i], " is negative");
    src[i + 1] = src[i] + len[i];
  }
  TORCH_CHECK_VALUE(src[G * S] == values.numel(), op, ": lengths add up to ", src[G * S], " but values has ",
                    values.numel(), " entries");
  for (int64_t s = 0; s < S; ++s) {
    dst[s + 1] = dst[s];
    for (int64_t g = 0; g < G; ++g) dst[s + 1] += len[g * S + s];
  }
  at::Tensor out = at::empty_like(v_c);
  const int64_t esz = static_cast<int64_t>(values.element_size());
  const char* x = static_cast<const char*>(v_c.const_data_ptr());
  char* y = static_cast<char*>(out.data_ptr());
  // grain: about 64 Ki elements of copying per task
  const int64_t grain = std::max<int64_t>(1, S * 65536 / std::max<int64_t>(1, values.numel()));
  at::parallel_for(0, S, grain, [&](int64_t lo, int64_t hi) {
    for (int64_t s = lo; s < hi; ++s) {
      int64_t at = dst[s];
      for (int64_t g = 0; g < G; ++g) {
        const int64_t n = len[g * S + s];
        if (n) std::memcpy(y + at * esz, x + src[g * S + s] * esz, static_cast<size_t>(n * esz));
        at += n;
      }
    }
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(dlrmbench, CPU, m) { m.impl("transpose_segments", &transpose_segments_cpu); }

}  // namespace dlrmbench
