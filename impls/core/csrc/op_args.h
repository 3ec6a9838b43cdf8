// Argument checks every backend of an op shares (dtypes, shapes, devices, lengths). Index range checks
// read the data and live with each backend (cpu_util.h, cuda/cuda_util.cuh).
#pragma once

#include <ATen/core/Tensor.h>

#include <utility>

#include "tt_args.h"

namespace dlrmbench {

inline TTShape check_tt_prefix_args(at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r,
                                    const at::Tensor& prefix_ids, const at::Tensor& out) {
  const char* op = "tt_prefix";
  const TTShape s = parse_tt_shape(op, cores, q, r);
  check_index(op, "prefix_ids", prefix_ids, cores[0]);
  check_rows(op, "out", out, prefix_ids.numel(), s.prefix_width(), cores[0]);
  return s;
}

// The items of a stage-2 op: their group and last digit, and one row per item (output rows or their gradient).
inline void check_items(const char* op, const TTShape& s, at::TensorList cores, const at::Tensor& item_group,
                        const at::Tensor& item_last, const at::Tensor& per_item, const char* per_item_name) {
  check_index(op, "item_group", item_group, cores[0]);
  check_index(op, "item_last", item_last, cores[0]);
  TORCH_CHECK_VALUE(item_group.numel() == item_last.numel(), op, ": item_group has ", item_group.numel(),
                    " entries but item_last has ", item_last.numel());
  check_rows(op, per_item_name, per_item, item_group.numel(), s.dim(), cores[0]);
}

inline TTShape check_tt_items_args(const char* op, const at::Tensor& prefix, at::TensorList cores, c10::IntArrayRef q,
                                   c10::IntArrayRef r, const at::Tensor& item_group, const at::Tensor& item_last,
                                   const at::Tensor& per_item, const char* per_item_name) {
  const TTShape s = parse_tt_shape(op, cores, q, r);
  check_rows(op, "prefix", prefix, -1, s.prefix_width(), cores[0]);
  check_items(op, s, cores, item_group, item_last, per_item, per_item_name);
  return s;
}

// The fused stages (tt_stages, tt_stages_backward): prefix ids and the items.
inline TTShape check_tt_stages_args(const char* op, at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r,
                                    const at::Tensor& prefix_ids, const at::Tensor& item_group,
                                    const at::Tensor& item_last, const at::Tensor& per_item,
                                    const char* per_item_name, int64_t num_rows) {
  const TTShape s = parse_tt_shape(op, cores, q, r);
  check_index(op, "prefix_ids", prefix_ids, cores[0]);
  check_items(op, s, cores, item_group, item_last, per_item, per_item_name);
  const int64_t cover = s.num_prefixes() * s.p[s.d - 1];
  TORCH_CHECK_VALUE(num_rows >= -1 && num_rows <= cover, op, ": num_rows = ", num_rows, " but the cores cover ", cover,
                    " rows (-1: unchecked beyond the digits)");
  return s;
}

inline void check_all_core_grads(const char* op, const TTShape& s, at::TensorList cores, at::TensorList grad_cores) {
  TORCH_CHECK_VALUE(static_cast<int>(grad_cores.size()) == s.d, op, ": expected ", s.d,
                    " core gradients (one per core), got ", grad_cores.size());
  for (int k = 0; k < s.d; ++k) check_rows(op, "grad_cores", grad_cores[k], s.p[k], s.core_width(k), cores[0]);
}

inline TTShape check_tt_last_backward_args(const at::Tensor& prefix, at::TensorList cores, c10::IntArrayRef q,
                                           c10::IntArrayRef r, const at::Tensor& item_group,
                                           const at::Tensor& item_last, const at::Tensor& grad_items,
                                           const at::Tensor& grad_last_core, const at::Tensor& grad_prefix) {
  const char* op = "tt_last_backward";
  const TTShape s = check_tt_items_args(op, prefix, cores, q, r, item_group, item_last, grad_items, "grad_items");
  const int L = s.d - 1;
  check_rows(op, "grad_last_core", grad_last_core, s.p[L], s.core_width(L), cores[0]);
  check_rows(op, "grad_prefix", grad_prefix, prefix.size(0), s.prefix_width(), cores[0]);
  return s;
}

inline TTShape check_tt_prefix_backward_args(at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r,
                                             const at::Tensor& prefix_ids, const at::Tensor& grad_prefix,
                                             at::TensorList grad_cores) {
  const char* op = "tt_prefix_backward";
  const TTShape s = parse_tt_shape(op, cores, q, r);
  check_index(op, "prefix_ids", prefix_ids, cores[0]);
  check_rows(op, "grad_prefix", grad_prefix, prefix_ids.numel(), s.prefix_width(), cores[0]);
  TORCH_CHECK_VALUE(static_cast<int>(grad_cores.size()) == s.d - 1, op, ": expected ", s.d - 1,
                    " core gradients (all cores but the last), got ", grad_cores.size());
  for (int k = 0; k < s.d - 1; ++k) check_rows(op, "grad_cores", grad_cores[k], s.p[k], s.core_width(k), cores[0]);
  return s;
}

// Returns the number of segments.
inline int64_t check_gather_pool_args(const at::Tensor& src, const at::Tensor& index,
                                      const at::Tensor& segment_offsets, const at::Tensor& out) {
  const char* op = "gather_pool";
  check_rows(op, "src", src, -1, src.dim() == 2 ? src.size(1) : 0, src);
  check_index(op, "index", index, src);
  check_index(op, "segment_offsets", segment_offsets, src);
  const int64_t S = segment_offsets.numel() - 1;
  TORCH_CHECK_VALUE(S >= 0, op, ": segment_offsets must have at least one entry");
  check_rows(op, "out", out, S, src.size(1), src);
  return S;
}

inline void check_scatter_add_rows_args(const at::Tensor& src, const at::Tensor& src_index,
                                        const at::Tensor& dst_index, const at::Tensor& out) {
  const char* op = "scatter_add_rows";
  check_rows(op, "src", src, -1, src.dim() == 2 ? src.size(1) : 0, src);
  check_index(op, "src_index", src_index, src);
  check_index(op, "dst_index", dst_index, src);
  check_rows(op, "out", out, -1, src.size(1), src);
  TORCH_CHECK_VALUE(dst_index.numel() == src_index.numel(), op, ": src_index has ", src_index.numel(),
                    " entries but dst_index has ", dst_index.numel());
}

inline void check_jagged_unique_args(const at::Tensor& values, const at::Tensor& offsets, int64_t num_tables,
                                     int64_t batch_size) {
  check_index("jagged_unique", "values", values, values);
  check_index("jagged_unique", "offsets", offsets, values);
  TORCH_CHECK_VALUE(num_tables >= 0 && batch_size > 0, "jagged_unique: bad num_tables/batch_size");
  TORCH_CHECK_VALUE(offsets.numel() == num_tables * batch_size + 1, "jagged_unique: offsets has ", offsets.numel(),
                    " entries, expected T*B+1 = ", num_tables * batch_size + 1);
}

// jagged_unique reads whole tables: their boundaries offsets[t * B] (t = 0..T, `bounds` read on the host) must run
// from 0 to nnz and never decrease, or ids would be left out (uninitialized outputs) or read out of range.
inline void check_table_bounds(const int64_t* bounds, int64_t num_tables, int64_t nnz) {
  TORCH_CHECK_VALUE(bounds[0] == 0 && bounds[num_tables] == nnz, "jagged_unique: offsets must run from 0 to "
                    "len(values) = ", nnz, ", got ", bounds[0], " .. ", bounds[num_tables]);
  for (int64_t t = 1; t <= num_tables; ++t)
    TORCH_CHECK_VALUE(bounds[t] >= bounds[t - 1], "jagged_unique: offsets at table boundary ", t, " (", bounds[t],
                      ") are below those at boundary ", t - 1, " (", bounds[t - 1], ")");
}

// route_keys: a table-major batch, per-table (r, c, base) and the shard numbering; returns the table count.
inline int64_t check_route_keys_args(const char* op, const at::Tensor& values, const at::Tensor& offsets,
                                     int64_t batch_size, const at::Tensor& table_r, const at::Tensor& table_c,
                                     const at::Tensor& table_base, const at::Tensor& shard_of, int64_t num_shards,
                                     int64_t count_shards) {
  for (const auto& [name, t] : {std::pair<const char*, const at::Tensor&>{"offsets", offsets}, {"table_r", table_r},
                                {"table_c", table_c}, {"table_base", table_base}, {"shard_of", shard_of}})
    check_index(op, name, t, values);
  check_index(op, "values", values, values);
  TORCH_CHECK_VALUE(batch_size > 0, op, ": batch_size must be > 0, got ", batch_size);
  const int64_t T = table_r.numel();
  TORCH_CHECK_VALUE(table_c.numel() == T && table_base.numel() == T, op, ": table_r, table_c and table_base must "
                    "have one entry per table; they have ", T, ", ", table_c.numel(), ", ", table_base.numel());
  TORCH_CHECK_VALUE(offsets.numel() == T * batch_size + 1, op, ": offsets has ", offsets.numel(), " entries, ",
                    T, " tables x batch ", batch_size, " need ", T * batch_size + 1);
  TORCH_CHECK_VALUE(num_shards >= 0 && count_shards >= 0 && count_shards <= num_shards, op,
                    ": need 0 <= count_shards (", count_shards, ") <= num_shards (", num_shards, ")");
  return T;
}

// transpose_segments: 1-D values and a [G, S] int64 lengths table on the same device (the kernels check the sums).
inline void check_transpose_segments_args(const char* op, const at::Tensor& values, const at::Tensor& lengths) {
  TORCH_CHECK_VALUE(values.dim() == 1, op, ": values must be 1-D, got ", values.dim(), " dimensions");
  TORCH_CHECK_VALUE(lengths.dim() == 2, op, ": lengths must be [G, S], got ", lengths.dim(), " dimensions");
  TORCH_CHECK_VALUE(lengths.scalar_type() == at::kLong, op, ": lengths must be int64");
  TORCH_CHECK_VALUE(lengths.device() == values.device(), op, ": lengths is on ", lengths.device(), ", values on ",
                    values.device());
}

}  // namespace dlrmbench
