// The index of one table's batch that EcoRec's step works from (ecorec_step.cpp): its ids sorted and deduplicated
// with the bag of every occurrence. Built in one radix sort of (id, bag) words and two passes over the sorted order;
// no position-indexed array (an inverse, a bag per position) is ever written.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

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

}  // namespace dlrmbench
