// route_keys on a GPU, composed of ATen ops: the keys expanded per column group, then one stable sort by shard
// (the device's radix sort) instead of the CPU kernel's counting sort; the same outputs (cpu/route_keys.cpp).
#include <ATen/ATen.h>

#include <tuple>

#include "composed.h"
#include "op_args.h"

namespace dlrmbench {
namespace {

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> route_keys_composed(
    const at::Tensor& values, const at::Tensor& offsets, int64_t batch_size, const at::Tensor& table_r,
    const at::Tensor& table_c, const at::Tensor& table_base, const at::Tensor& shard_of, int64_t num_shards,
    int64_t count_shards) {
  const char* op = "route_keys";
  const int64_t T = check_route_keys_args(op, values, offsets, batch_size, table_r, table_c, table_base, shard_of,
                                          num_shards, count_shards);
  const int64_t B = batch_size;
  const auto opts = values.options();
  TORCH_CHECK_VALUE(values.numel() == 0 || values.min().item<int64_t>() >= 0, op, ": negative id in values");
  const at::Tensor lengths = offsets.slice(0, 1) - offsets.slice(0, 0, -1);
  // repeat_interleave(self, repeats, dim, output_size): the output size given saves a host read of the total
  const at::Tensor table = at::repeat_interleave(at::arange(T, opts), lengths.view({T, B}).sum(1), 0, values.numel());
  const at::Tensor sample = at::repeat_interleave(at::arange(T * B, opts).remainder(B), lengths, 0, values.numel());
  const at::Tensor keep = table_r.index_select(0, table) > 0;
  at::Tensor v = values.masked_select(keep), t = table.masked_select(keep), smp = sample.masked_select(keep);
  const at::Tensor c = table_c.index_select(0, t);
  const int64_t m = c.numel() ? c.sum().item<int64_t>() : 0;
  const at::Tensor copy = at::repeat_interleave(at::arange(v.numel(), opts), c, 0, m);
  const at::Tensor k = at::arange(m, opts) - at::repeat_interleave(at::cumsum(c, 0) - c, c, 0, m);
  v = v.index_select(0, copy);
  t = t.index_select(0, copy);
  smp = smp.index_select(0, copy);
  const at::Tensor r = table_r.index_select(0, t);
  const at::Tensor at_ = table_base.index_select(0, t) + k * r + v.remainder(r);
  TORCH_CHECK_VALUE(m == 0 || at_.max().item<int64_t>() < shard_of.numel(), op, ": shard_of has ",
                    shard_of.numel(), " entries, fewer than the tables' r x c");
  const at::Tensor shard = shard_of.index_select(0, at_);
  TORCH_CHECK_VALUE(m == 0 || (shard.min().item<int64_t>() >= 0 && shard.max().item<int64_t>() < num_shards), op,
                    ": a shard number is outside [0, ", num_shards, ")");
  const at::Tensor order = std::get<1>(at::sort(shard, /*stable=*/true, /*dim=*/0, /*descending=*/false));
  const at::Tensor counted = shard < count_shards;
  const at::Tensor per_sample =
      at::bincount(shard.masked_select(counted) * B + smp.masked_select(counted), {}, count_shards * B);
  return {v.div(r, "floor").index_select(0, order), smp.index_select(0, order), at::bincount(shard, {}, num_shards),
          per_sample.view({count_shards, B})};
}

}  // namespace

DLRMBENCH_COMPOSED("route_keys", route_keys_composed)

}  // namespace dlrmbench
