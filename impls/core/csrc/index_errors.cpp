// The index-error record of each device and the op that reads it (index_errors.h).
#include "index_errors.h"

#include <ATen/ATen.h>
#include <torch/library.h>

#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace dlrmbench {

at::Tensor index_error_record(const c10::Device& device) {
  static std::mutex mu;
  // never destroyed: a device tensor freed after the CUDA context at exit would fail
  static auto* records = new std::map<std::pair<int, int>, at::Tensor>();
  const std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_pair(static_cast<int>(device.type()), static_cast<int>(device.index()));
  auto it = records->find(key);
  if (it == records->end())
    it = records->emplace(key, at::zeros({4}, at::TensorOptions().dtype(at::kLong).device(device))).first;
  return it->second;
}

namespace {

const char* op_name(int64_t op) {
  switch (op) {
    case kOpPrefix: return "tt_prefix";
    case kOpLast: return "tt_last";
    case kOpLastBackward: return "tt_last_backward";
    case kOpPrefixBackward: return "tt_prefix_backward";
    case kOpStages: return "tt_stages";
    default: return "a TT op";
  }
}

std::string what_of(int64_t kind, int64_t pos, int64_t value, int64_t limit) {
  const std::string p = std::to_string(pos), v = std::to_string(value), l = std::to_string(limit);
  switch (kind) {
    case kPrefixId: return "prefix_ids[" + p + "] = " + v + " is outside [0, " + l + ")";
    case kItemGroup: return "item_group[" + p + "] = " + v + " is outside [0, " + l + ")";
    case kItemLast: return "item_last[" + p + "] = " + v + " is outside [0, " + l + ")";
    case kItemRow:
      return "item " + p + " reads row " + v + " of a table of " + l + " rows: the id is out of range (rows past " +
             l + " are the TT shape's padding)";
    default: return "index " + p + " = " + v + " is outside [0, " + l + ")";
  }
}

void raise_index_error(const at::Tensor& like) {
  if (like.device().is_cpu()) return;  // the CPU kernels raised at once
  at::Tensor rec = index_error_record(like.device());
  const at::Tensor host = rec.cpu();  // the one sync
  const int64_t* h = host.data_ptr<int64_t>();
  if (h[0] == 0) return;
  rec.zero_();
  TORCH_CHECK_VALUE(false, op_name(h[0] / 8), ": ", what_of(h[0] % 8, h[1], h[2], h[3]),
                    " (found on the GPU with checks skipped: the kernel read zeros instead and left the record)");
}

}  // namespace

TORCH_LIBRARY_IMPL(dlrmbench, CompositeExplicitAutograd, m) { m.impl("raise_index_error", &raise_index_error); }

}  // namespace dlrmbench
