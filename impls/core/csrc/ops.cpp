// The dlrmbench op library: schemas only. Kernels register per backend in cpu/*.cpp and cuda/*.cu.
#include <torch/library.h>

TORCH_LIBRARY(dlrmbench, m) {
  // Validates table-major jagged lookups. values int64 [nnz]; offsets int64 [T*B+1]; table_rows int64 [T].
  // Returns int64 [5] = (code, table, bag, position, value) of the first problem in (offset, bag) order;
  // code 0 means valid. Codes: 1 offsets[0] != 0, 2 offsets decrease, 3 offsets[-1] != nnz,
  // 4 negative id, 5 id >= rows. For codes 1-3 `position` is the offset index, `value` the offset.
  m.def("bounds_check(Tensor values, Tensor offsets, Tensor table_rows, int batch_size) -> Tensor");
  // Per-table sorted unique ids. Returns (unique [U], unique_offsets [T+1], inverse [nnz], counts [U],
  // sorted_positions [nnz]): table t's unique ids are unique[unique_offsets[t]:unique_offsets[t+1]],
  // ascending; values[i] == unique[inverse[i]]; sorted_positions lists the original positions in
  // (table, id, position) order, i.e. the back map from sorted order to the input.
  m.def(
      "jagged_unique(Tensor values, Tensor offsets, int num_tables, int batch_size) "
      "-> (Tensor, Tensor, Tensor, Tensor, Tensor)");

  // TT stages (see tt_args.h for the core layout). cores: d tensors [p_k, r_k*q_k*r_{k+1}]; q: d ints;
  // r: d+1 ints with r_0 = r_d = 1. A prefix id is row div p_{d-1}; an item's last digit is row mod p_{d-1}.
  // Outputs are caller-provided (contiguous), so schedules can reuse workspace buffers.
  // check_indices (every op that takes indices into a tensor): False when the caller vouches that every index is
  // in range (indices derived from a batch validated at the step's boundary); the CUDA kernels then skip their
  // range and order checks, which cost host-device syncs. The CPU kernels check always (no sync).
  // Stage 1: writes the prefix products of the first d-1 cores into out [G, Q_{d-2}*r_{d-1}].
  m.def("tt_prefix(Tensor[] cores, int[] q, int[] r, Tensor prefix_ids, Tensor(a!) out, bool check_indices=True) -> ()");
  // Stage 2: writes rows [n, D] into out; item i is prefix[item_group[i]] times the last core's slice
  // item_last[i].
  m.def(
      "tt_last(Tensor prefix, Tensor[] cores, int[] q, int[] r, Tensor item_group, Tensor item_last, "
      "Tensor(a!) out, bool check_indices=True) -> ()");
  // Backward of stage 2: adds into grad_last_core and overwrites grad_prefix [G, width] with the prefix
  // gradient (summed over each group's items); item_group must be non-decreasing.
  m.def(
      "tt_last_backward(Tensor prefix, Tensor[] cores, int[] q, int[] r, Tensor item_group, Tensor item_last, "
      "Tensor grad_items, Tensor(a!) grad_last_core, Tensor(b!) grad_prefix, bool check_indices=True) -> ()");
  // Backward of stage 1: adds into the gradients of cores 0..d-2 (d-1 tensors shaped like the cores).
  m.def(
      "tt_prefix_backward(Tensor[] cores, int[] q, int[] r, Tensor prefix_ids, Tensor grad_prefix, "
      "Tensor(a!)[] grad_cores, bool check_indices=True) -> ()");
  // Both stages in one pass (tt_prefix then tt_last, without a [G, width] prefix buffer): writes rows [n, D]
  // into out; item i is the prefix product of prefix_ids[item_group[i]] times the last core's slice
  // item_last[i]. num_rows (>= 0): the table's rows; an item's row prefix_ids[item_group[i]] * p_{d-1} +
  // item_last[i] must be below it (the cores cover prod(p) >= num_rows rows: the rest is padding no id may
  // read). -1: only the digits are checked. The stage ops alone (tt_prefix, tt_last) see prefixes or items,
  // never both, so they check digits only.
  m.def(
      "tt_stages(Tensor[] cores, int[] q, int[] r, Tensor prefix_ids, Tensor item_group, Tensor item_last, "
      "Tensor(a!) out, bool check_indices=True, int num_rows=-1) -> ()");
  // Backward of tt_stages (the prefixes recomputed, both stages walked back): adds into all d core gradients;
  // item_group must be non-decreasing.
  m.def(
      "tt_stages_backward(Tensor[] cores, int[] q, int[] r, Tensor prefix_ids, Tensor item_group, "
      "Tensor item_last, Tensor grad_items, Tensor(a!)[] grad_cores, bool check_indices=True, int num_rows=-1) -> ()");
  // EcoRec's table step, forward: one table's jagged ids (values [nnz], offsets [B+1], ids in range: validated at the
  // step's boundary) deduplicated and sorted, the unique ids cut into micro-batches (the SC24 artifact's rule:
  // micro_batches chunks, fewer when a chunk would hold under min_chunk ids), and per micro-batch the prefix groups,
  // both TT stages and the rows added into their bags. Returns (out [B, D] sum-pooled, unique [U] ascending,
  // count_offsets [U+1]: unique u's occurrences are sorted order [co[u], co[u+1]), occ_bags [nnz]: the bag of each
  // sorted occurrence, chunk_bounds [m+1]: micro-batch k is unique[cb[k]:cb[k+1]], chunk_groups [m]: its prefix
  // groups E1). num_rows as tt_stages.
  m.def(
      "ecorec_forward(Tensor[] cores, int[] q, int[] r, Tensor values, Tensor offsets, int batch_size, "
      "int micro_batches, int min_chunk, int num_rows=-1) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)");
  // Backward of ecorec_forward from what it returned: per micro-batch the bags' gradients grad [B, D] summed per
  // unique id, the prefix groups again, and both stages walked back; adds into all d core gradients.
  m.def(
      "ecorec_backward(Tensor[] cores, int[] q, int[] r, Tensor unique, Tensor count_offsets, Tensor occ_bags, "
      "Tensor chunk_bounds, Tensor grad, Tensor(a!)[] grad_cores, int num_rows=-1) -> ()");
  // EcoRec's step over several TT tables of one batch in one call each way: TT table k reads the batch's table
  // tables[k] of a table-major batch (values [nnz], offsets [num_tables * batch_size + 1], as bounds_check's), its
  // cores_per_table[k] cores next in cores, its radices next in q, its ranks next in r (d_k + 1 of them), its row
  // limit num_rows[k]. Per TT table, what ecorec_forward returns, as six lists (out, unique, count_offsets, occ_bags,
  // chunk_bounds, chunk_groups); the backward takes them back with each table's gradient grads[k] [B, D_k] and adds
  // into grad_cores (laid out as cores). A table's step is ecorec_forward's / ecorec_backward's; an error names the
  // table.
  m.def(
      "ecorec_tables_forward(Tensor[] cores, int[] cores_per_table, int[] q, int[] r, Tensor values, Tensor offsets, "
      "int[] tables, int batch_size, int micro_batches, int min_chunk, int[] num_rows) "
      "-> (Tensor[], Tensor[], Tensor[], Tensor[], Tensor[], Tensor[])");
  m.def(
      "ecorec_tables_backward(Tensor[] cores, int[] cores_per_table, int[] q, int[] r, Tensor[] unique, "
      "Tensor[] count_offsets, Tensor[] occ_bags, Tensor[] chunk_bounds, Tensor[] grads, Tensor(a!)[] grad_cores, "
      "int[] num_rows) -> ()");
  // TT-Rec's step over several TT tables of one batch in one call each way, the tables laid out as
  // ecorec_tables_forward's: in chunks of `chunk` occurrences (FBTT's batch_count) every occurrence runs its whole
  // chain, forward into its bag (returns each table's sum-pooled [B, D_k]), backward from its bag's gradient grads[k]
  // (the chain recomputed) into grad_cores. No dedup. Ids are checked (a bad one named with its table).
  m.def(
      "ttrec_tables_forward(Tensor[] cores, int[] cores_per_table, int[] q, int[] r, Tensor values, Tensor offsets, "
      "int[] tables, int batch_size, int chunk, int[] num_rows) -> Tensor[]");
  m.def(
      "ttrec_tables_backward(Tensor[] cores, int[] cores_per_table, int[] q, int[] r, Tensor values, Tensor offsets, "
      "int[] tables, int batch_size, int chunk, Tensor[] grads, Tensor(a!)[] grad_cores, int[] num_rows) -> ()");
  // EL-Rec's step over several TT tables, laid out as ecorec_tables_forward's. Forward: each table's ids sorted and
  // deduplicated, one stage-1 product per prefix group of the unique ids and stage 2 once per occurrence, into its
  // bag. Returns per table (out [B, D_k], unique [U] ascending, count_offsets [U+1], occ_bags [nnz], groups [1]: E1)
  // as ecorec_forward's. Backward: each unique id's gradient summed from its occurrences' bags, then its whole chain
  // walked back (no prefix reuse), into grad_cores.
  m.def(
      "elrec_tables_forward(Tensor[] cores, int[] cores_per_table, int[] q, int[] r, Tensor values, Tensor offsets, "
      "int[] tables, int batch_size, int[] num_rows) -> (Tensor[], Tensor[], Tensor[], Tensor[], Tensor[])");
  m.def(
      "elrec_tables_backward(Tensor[] cores, int[] cores_per_table, int[] q, int[] r, Tensor[] unique, "
      "Tensor[] count_offsets, Tensor[] occ_bags, Tensor[] grads, Tensor(a!)[] grad_cores, int[] num_rows) -> ()");
  // Raises the ValueError an unchecked bad index left in like's device's record, and clears it (index_errors.h);
  // nothing to do on the CPU, whose kernels raise at once.
  m.def("raise_index_error(Tensor like) -> ()");
  // out[s] += sum(src[index[j]] for j in segment_offsets[s]:segment_offsets[s+1]).
  m.def("gather_pool(Tensor src, Tensor index, Tensor segment_offsets, Tensor(a!) out, bool check_indices=True) -> ()");
  // out[dst_index[j]] += src[src_index[j]] for every j.
  m.def("scatter_add_rows(Tensor src, Tensor src_index, Tensor dst_index, Tensor(a!) out, bool check_indices=True) -> ()");
  // Routes every key of a table-major batch (values, offsets [T*B+1]) to the shards holding it: key v of table
  // t (r = table_r[t] row shards, c = table_c[t] column groups; r = 0: not routed) goes, once per column group
  // k, to shard shard_of[table_base[t] + k * r + v % r] as local row v / r. Returns (keys [m], samples [m],
  // shard_counts [num_shards], sample_counts [count_shards, B]): the routed keys and their bag's sample shard
  // by shard (each shard's in (table, sample) order), how many each shard got, and per-sample counts for the
  // first count_shards shards.
  m.def(
      "route_keys(Tensor values, Tensor offsets, int batch_size, Tensor table_r, Tensor table_c, Tensor table_base, "
      "Tensor shard_of, int num_shards, int count_shards) -> (Tensor, Tensor, Tensor, Tensor)");
  // A buffer of G x S segments with lengths [G, S] (int64), laid out (g, s): G payloads of S segments each, back
  // to back; returns the same elements laid out (s, g) (segment s of every payload in payload order, then s + 1).
  // Any dtype; values 1-D.
  m.def("transpose_segments(Tensor values, Tensor lengths) -> Tensor");
  // Fills float32 out [n, c] (rows contiguous): out[i, j] = a uniform draw in [low, high) that is a function of
  // (seed, row_start + i * row_step, col_start + j) only (cpu/counter_uniform.cpp gives the hash); low and high
  // are taken as float32. Any shard of a table is generated without the rest of it.
  m.def(
      "counter_uniform(int seed, int row_start, int row_step, int col_start, float low, float high, Tensor(a!) out) "
      "-> ()");
}
