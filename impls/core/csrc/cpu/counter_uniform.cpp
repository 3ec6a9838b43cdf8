// CPU kernel of dlrmbench::counter_uniform (schema in ../ops.cpp): a uniform draw that is a pure function of
// (seed, row, column), so any block of a table's rows and columns is generated directly, without the rest of
// the table (a shard of a table that does not fit one machine starts from exactly the rows the whole table has).
//   h = fmix32(col * 0x9E3779B1 ^ fmix32(row_hi ^ s1 ^ fmix32(row_lo ^ s0)))   (MurmurHash3's finalizer)
//   value = low + (high - low) * (h >> 8) * 2^-24, in double from float32 bounds: for bounds -b, b (the tables'
// initializers) every step is exact before the one rounding to float32, so the reference (reference.py) gives
// the same bits.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include <cstdint>
#include <limits>

#include "counter_hash.h"

namespace dlrmbench {
namespace {

void counter_uniform_cpu(int64_t seed, int64_t row_start, int64_t row_step, int64_t col_start, double low,
                         double high, at::Tensor out) {
  const char* op = "counter_uniform";
  TORCH_CHECK_VALUE(out.scalar_type() == at::kFloat && out.dim() == 2, op, ": out must be a 2-D float32 tensor");
  TORCH_CHECK_VALUE(out.size(1) <= 1 || out.stride(1) == 1, op, ": out's rows must be contiguous");
  TORCH_CHECK_VALUE(row_start >= 0 && row_step >= 1 && col_start >= 0, op, ": row_start (", row_start,
                    ") and col_start (", col_start, ") must be >= 0 and row_step (", row_step, ") >= 1");
  const int64_t n = out.size(0), cols = out.size(1), ld = out.stride(0);
  TORCH_CHECK_VALUE(n == 0 || n - 1 <= (std::numeric_limits<int64_t>::max() - row_start) / row_step, op,
                    ": row ids past int64 (row_start ", row_start, ", row_step ", row_step, ", ", n, " rows)");
  const CounterKey key(seed, static_cast<float>(low), static_cast<float>(high));
  float* o = out.data_ptr<float>();
  at::parallel_for(0, n, 1024, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const uint32_t row_hash = key.row(row_start + i * row_step);
      float* dst = o + i * ld;
      for (int64_t c = 0; c < cols; ++c) dst[c] = key.value(row_hash, col_start + c);
    }
  });
}

}  // namespace

TORCH_LIBRARY_IMPL(dlrmbench, CPU, m) { m.impl("counter_uniform", &counter_uniform_cpu); }

}  // namespace dlrmbench
