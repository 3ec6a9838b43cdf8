// CPU kernel of dlrmbench::bounds_check (schema and result codes in ../ops.cpp).
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <array>
#include <cstdint>
#include <limits>
#include <mutex>

namespace dlrmbench {
namespace {

using Problem = std::array<int64_t, 5>;  // code, table, bag, position, value

at::Tensor bounds_check_cpu(const at::Tensor& values, const at::Tensor& offsets,
                            const at::Tensor& table_rows, int64_t batch_size) {
  TORCH_CHECK_VALUE(values.scalar_type() == at::kLong && offsets.scalar_type() == at::kLong &&
                        table_rows.scalar_type() == at::kLong,
                    "bounds_check: values, offsets and table_rows must be int64");
  TORCH_CHECK_VALUE(batch_size > 0, "bounds_check: batch_size must be > 0, got ", batch_size);
  const int64_t T = table_rows.numel();
  TORCH_CHECK_VALUE(offsets.numel() == T * batch_size + 1, "bounds_check: offsets has ", offsets.numel(),
                    " entries, expected T*B+1 = ", T * batch_size + 1);
  const auto v_c = values.contiguous();
  const auto o_c = offsets.contiguous();
  const auto r_c = table_rows.contiguous();
  const int64_t* v = v_c.data_ptr<int64_t>();
  const int64_t* o = o_c.data_ptr<int64_t>();
  const int64_t* rows = r_c.data_ptr<int64_t>();
  const int64_t nnz = values.numel();
  const int64_t nbags = T * batch_size;

  Problem first{0, -1, -1, -1, 0};
  auto report = [&](int64_t code, int64_t bag, int64_t pos, int64_t val) {
    const int64_t t = bag < 0 ? -1 : bag / batch_size;
    const int64_t b = bag < 0 ? -1 : bag % batch_size;
    first = {code, t, b, pos, val};
  };
  // Offsets first, sequentially (cheap, and the value check needs valid offsets).
  if (o[0] != 0) {
    report(1, nbags > 0 ? 0 : -1, 0, o[0]);  // no table to name when there is none
  } else {
    for (int64_t i = 0; i < nbags; ++i) {
      if (o[i + 1] < o[i]) {
        report(2, i, i + 1, o[i + 1]);
        break;
      }
    }
    if (first[0] == 0 && o[nbags] != nnz) report(3, nbags - 1, nbags, o[nbags]);
  }
  if (first[0] == 0) {
    // Ids, in parallel over bags; keep the problem in the lowest bag (then lowest position).
    std::mutex mu;
    int64_t best_bag = std::numeric_limits<int64_t>::max();
    at::parallel_for(0, nbags, 1024, [&](int64_t lo, int64_t hi) {
      for (int64_t bag = lo; bag < hi; ++bag) {
        const int64_t n = rows[bag / batch_size];
        for (int64_t p = o[bag]; p < o[bag + 1]; ++p) {
          const int64_t id = v[p];
          if (id < 0 || id >= n) {
            std::lock_guard<std::mutex> lock(mu);
            if (bag < best_bag) {
              best_bag = bag;
              report(id < 0 ? 4 : 5, bag, p, id);
            }
            return;  // later bags of this chunk cannot beat it
          }
        }
      }
    });
  }
  auto out = at::empty({5}, values.options().dtype(at::kLong));
  std::copy(first.begin(), first.end(), out.data_ptr<int64_t>());
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(dlrmbench, CPU, m) { m.impl("bounds_check", &bounds_check_cpu); }

}  // namespace dlrmbench
