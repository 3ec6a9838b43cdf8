// The index of one table's batch that EcoRec's step works from (ecorec_step.cpp): its ids sorted and deduplicated
// with the bag of every occurrence. Built in one radix sort of (id, bag) words and two passes over the sorted order;
// no position-indexed array (an inverse, a bag per position) is ever written.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "cpu_util.h"

namespace dlrmbench {

struct OccurrenceIndex {
  at::Tensor unique;         // [U] the distinct ids, ascending
  at::Tensor count_offsets;  // [U + 1] the occurrences of unique u are sorted occurrences [co[u], co[u + 1])
  at::Tensor occ_bags;       // [nnz] the bag of every sorted occurrence (in a unique id's run, ascending)
  bool in_range = true;      // false: an id lies outside [0, limit), and nothing else is set
};

// values, offsets: one table's jagged ids (offsets checked by the caller: 0 .. nnz, never decreasing); every id must
// lie in [0, limit) (the caller names the first that does not when in_range is false).
OccurrenceIndex sort_occurrences(const int64_t* values, const int64_t* offsets, int64_t batch_size, int64_t nnz,
                                 int64_t limit, const at::TensorOptions& opts);


// The prefix groups of every micro-batch over the ascending unique ids (micro-batch k: [bounds[k], bounds[k + 1])),
// numbered on from one micro-batch to the next: the distinct prefixes (id div p_last) of each micro-batch and where
// each group's ids start (group x: ids group_start[x] .. group_start[x + 1]); groups_per[k]: micro-batch k's number
// of groups. Nothing per id is written. The arrays are reused from call to call (cpu_util.h: Reused), the tensors
// views of them for this call only.
struct Groups {
  Reused<int64_t, struct PrefixIdsTag> pid_buf;
  Reused<int64_t, struct GroupStartTag> start_buf;
  at::Tensor prefix_ids, group_start;
  explicit Groups(int64_t n) : pid_buf(n), start_buf(n + 1) {}
};

void prefix_groups(Groups& g, const int64_t* uq, const std::vector<int64_t>& bounds, int64_t p_last,
                   const at::TensorOptions& opts, int64_t* groups_per);

}  // namespace dlrmbench
