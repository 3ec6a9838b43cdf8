// CPU kernel of dlrmbench::route_keys (schema in ../ops.cpp): every key of a table-major jagged batch to the
// shards that hold it, laid out shard by shard (a stable counting sort: one pass counts, one pass places), so
// a shard's keys come in (table, sample) order. Key v of table t (r_t row shards, c_t column groups) lives in
// row shard v % r_t at local row v / r_t, once per column group k: shard shard_of[base_t + k * r_t + v % r_t].
// Tables with r_t = 0 are not routed (they stay with the caller: data-parallel tables). A whole table (r_t = c_t
// = 1, every table of a table-wise plan) is counted bag by bag and copied as one run.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <vector>

#include "../op_args.h"
#include "cpu_util.h"

namespace dlrmbench {
namespace {

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> route_keys_cpu(
    const at::Tensor& values, const at::Tensor& offsets, int64_t batch_size, const at::Tensor& table_r,
    const at::Tensor& table_c, const at::Tensor& table_base, const at::Tensor& shard_of, int64_t num_shards,
    int64_t count_shards) {
  const char* op = "route_keys";
  const int64_t T = check_route_keys_args(op, values, offsets, batch_size, table_r, table_c, table_base, shard_of,
                                          num_shards, count_shards);
  const auto v_c = values.contiguous(), o_c = offsets.contiguous(), r_c = table_r.contiguous(),
             c_c = table_c.contiguous(), b_c = table_base.contiguous(), s_c = shard_of.contiguous();
  const int64_t *v = v_c.data_ptr<int64_t>(), *o = o_c.data_ptr<int64_t>(), *R = r_c.data_ptr<int64_t>(),
                *C = c_c.data_ptr<int64_t>(), *base = b_c.data_ptr<int64_t>(), *sof = s_c.data_ptr<int64_t>();
  const int64_t B = batch_size, n_sof = shard_of.numel();
  auto opts = values.options();
  at::Tensor shard_counts = at::zeros({num_shards}, opts);
  at::Tensor sample_counts = at::zeros({count_shards, B}, opts);
  int64_t* cnt = shard_counts.data_ptr<int64_t>();
  int64_t* per_sample = sample_counts.data_ptr<int64_t>();
  // the shard holding cell `at` of table t's (column group, row shard) numbering, checked
  auto shard_at = [&](int64_t t, int64_t at) {
    TORCH_CHECK_VALUE(at < n_sof, op, ": table ", t, ": shard_of has ", n_sof, " entries, needs ", at + 1);
    const int64_t s = sof[at];
    TORCH_CHECK_VALUE(s >= 0 && s < num_shards, op, ": table ", t, ": shard number ", s, " outside [0, ", num_shards,
                      ")");
    return s;
  };
  // pass 1: count (and check every id and shard number once)
  for (int64_t t = 0; t < T; ++t) {
    const int64_t r = R[t];
    if (r == 0) continue;
    if (r == 1 && C[t] == 1) {  // a whole table: every key to one shard, bag by bag
      const int64_t s = shard_at(t, base[t]);
      for (int64_t b = 0; b < B; ++b) {
        for (int64_t e = o[t * B + b]; e < o[t * B + b + 1]; ++e)
          TORCH_CHECK_VALUE(v[e] >= 0, op, ": table ", t, ", bag ", b, ": negative id ", v[e], " at values[", e, "]");
        const int64_t n = o[t * B + b + 1] - o[t * B + b];
        cnt[s] += n;
        if (s < count_shards) per_sample[s * B + b] += n;
      }
      continue;
    }
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t e = o[t * B + b]; e < o[t * B + b + 1]; ++e) {
        TORCH_CHECK_VALUE(v[e] >= 0, op, ": table ", t, ", bag ", b, ": negative id ", v[e], " at values[", e, "]");
        for (int64_t k = 0; k < C[t]; ++k) {
          const int64_t s = shard_at(t, base[t] + k * r + v[e] % r);
          ++cnt[s];
          if (s < count_shards) ++per_sample[s * B + b];
        }
      }
    }
  }
  std::vector<int64_t> next(num_shards + 1, 0);
  for (int64_t s = 0; s < num_shards; ++s) next[s + 1] = next[s] + cnt[s];
  const int64_t m = next[num_shards];
  at::Tensor keys = at::empty({m}, opts), samples = at::empty({m}, opts);
  int64_t *key = keys.data_ptr<int64_t>(), *smp = samples.data_ptr<int64_t>();
  // pass 2: place, stably
  for (int64_t t = 0; t < T; ++t) {
    const int64_t r = R[t];
    if (r == 0) continue;
    if (r == 1 && C[t] == 1) {  // a whole table: its keys in one run, copied as they are
      const int64_t s = sof[base[t]], first = o[t * B], n = o[(t + 1) * B] - first;
      std::copy(v + first, v + first + n, key + next[s]);
      for (int64_t b = 0; b < B; ++b) std::fill(smp + next[s] + o[t * B + b] - first,
                                                smp + next[s] + o[t * B + b + 1] - first, b);
      next[s] += n;
      continue;
    }
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t e = o[t * B + b]; e < o[t * B + b + 1]; ++e) {
        for (int64_t k = 0; k < C[t]; ++k) {
          const int64_t pos = next[sof[base[t] + k * r + v[e] % r]]++;
          key[pos] = v[e] / r;
          smp[pos] = b;
        }
      }
    }
  }
  return {keys, samples, shard_counts, sample_counts};
}

}  // namespace

TORCH_LIBRARY_IMPL(dlrmbench, CPU, m) { m.impl("route_keys", &route_keys_cpu); }

}  // namespace dlrmbench
