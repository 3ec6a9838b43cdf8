// Registers the CPU kernels of the TT ops: the native build's (isa.h), or, where the native build is AVX-512, a
// kernel that runs the native or the AVX2 build (cpu/*_avx2.cpp) as set_cpu_isa last chose (process-wide; the
// native one unless a test or benchmark asks otherwise). Also the ops that name and choose the build.
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

#include "cpu_kernels.h"
#include "isa.h"
#include "tt_kernels.h"

#if defined(DLRMBENCH_AVX512)
#define DLRMBENCH_KERNELS_NS isa_avx2
#include "tt_kernels.h"
#endif

namespace dlrmbench {
namespace {

#define DLRMBENCH_STR_(x) #x
#define DLRMBENCH_STR(x) DLRMBENCH_STR_(x)
// "avx512", "avx2" or "portable": the namespace name without "isa_".
const std::string kNative = std::string(DLRMBENCH_STR(DLRMBENCH_ISA_NS)).substr(4);

std::atomic<bool> use_avx2{false};  // only ever set where an AVX2 build exists beside the native one

std::vector<std::string> cpu_isas() {
#if defined(DLRMBENCH_AVX512)
  return {kNative, "avx2"};
#else
  return {kNative};
#endif
}

std::string cpu_isa() { return use_avx2.load() ? "avx2" : kNative; }

void set_cpu_isa(std::string isa) {
  const std::vector<std::string> have = cpu_isas();
  std::string names;
  for (const auto& h : have) names += (names.empty() ? "" : ", ") + h;
  TORCH_CHECK_VALUE(std::find(have.begin(), have.end(), isa) != have.end(), "set_cpu_isa: '", isa,
                    "' is not built into this library (built: ", names, ")");
  use_avx2.store(isa != kNative);
}

#if defined(DLRMBENCH_AVX512)
// Calls the native or the AVX2 build of one kernel.
template <auto Native, auto Avx2>
struct Pick;
template <typename... A, void (*Native)(A...), void (*Avx2)(A...)>
struct Pick<Native, Avx2> {
  static void call(A... a) {
    if (use_avx2.load(std::memory_order_relaxed))
      Avx2(a...);
    else
      Native(a...);
  }
};
#define DLRMBENCH_CPU_KERNEL(f) &Pick<&DLRMBENCH_ISA_NS::f, &isa_avx2::f>::call
#else
#define DLRMBENCH_CPU_KERNEL(f) &DLRMBENCH_ISA_NS::f
#endif

}  // namespace

void tt_stages_cpu_selected(at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r, const at::Tensor& prefix_ids,
                            const at::Tensor& item_group, const at::Tensor& item_last, at::Tensor out,
                            bool check_indices, int64_t num_rows) {
  (DLRMBENCH_CPU_KERNEL(tt_stages_cpu))(cores, q, r, prefix_ids, item_group, item_last, out, check_indices, num_rows);
}

void tt_stages_backward_cpu_selected(at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r,
                                     const at::Tensor& prefix_ids, const at::Tensor& item_group,
                                     const at::Tensor& item_last, const at::Tensor& grad_items,
                                     at::TensorList grad_cores, bool check_indices, int64_t num_rows) {
  (DLRMBENCH_CPU_KERNEL(tt_stages_backward_cpu))(cores, q, r, prefix_ids, item_group, item_last, grad_items, grad_cores,
                                               check_indices, num_rows);
}

void tt_stages_pooled_cpu_selected(at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r,
                                   const at::Tensor& unique, const at::Tensor& prefix_ids,
                                   const at::Tensor& group_start, const at::Tensor& count_offsets,
                                   const at::Tensor& occ_bags, at::Tensor out, bool per_occurrence) {
  (DLRMBENCH_CPU_KERNEL(tt_stages_pooled_cpu))(cores, q, r, unique, prefix_ids, group_start, count_offsets, occ_bags,
                                             out, per_occurrence);
}

void tt_stages_backward_pooled_cpu_selected(at::TensorList cores, c10::IntArrayRef q, c10::IntArrayRef r,
                                            const at::Tensor& unique, const at::Tensor& prefix_ids,
                                            const at::Tensor& group_start, const at::Tensor& count_offsets,
                                            const at::Tensor& occ_bags, const at::Tensor& grad,
                                            at::TensorList grad_cores) {
  (DLRMBENCH_CPU_KERNEL(tt_stages_backward_pooled_cpu))(cores, q, r, unique, prefix_ids, group_start, count_offsets,
                                                      occ_bags, grad, grad_cores);
}

TORCH_LIBRARY_FRAGMENT(dlrmbench, m) {
  // The vector ISA builds of the CPU TT kernels in this library (the native one first), the one the TT ops run,
  // and a choice between them (ValueError naming the builds for one not built).
  m.def("cpu_isas() -> str[]", &cpu_isas);
  m.def("cpu_isa() -> str", &cpu_isa);
  m.def("set_cpu_isa(str isa) -> ()", &set_cpu_isa);
}

TORCH_LIBRARY_IMPL(dlrmbench, CPU, m) {
  m.impl("tt_prefix", DLRMBENCH_CPU_KERNEL(tt_prefix_cpu));
  m.impl("tt_last", DLRMBENCH_CPU_KERNEL(tt_last_cpu));
  m.impl("tt_last_backward", DLRMBENCH_CPU_KERNEL(tt_last_backward_cpu));
  m.impl("tt_prefix_backward", DLRMBENCH_CPU_KERNEL(tt_prefix_backward_cpu));
  m.impl("tt_stages", DLRMBENCH_CPU_KERNEL(tt_stages_cpu));
  m.impl("tt_stages_backward", DLRMBENCH_CPU_KERNEL(tt_stages_backward_cpu));
}

}  // namespace dlrmbench
