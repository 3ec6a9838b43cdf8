// How a composition of ATen ops (csrc/*_composed.cpp) registers: as the CUDA kernel of its dlrmbench op, and for
// every device as dlrmbench_composed::<op> (schema inferred from the C++ signature, arguments positional), a name
// only the tests call: CI has no GPU, so the tests run each composition on CPU tensors against the CPU kernel and
// the reference. Every composition registers through this macro; tests/core/test_composed.py lists the ones it
// finds in the sources and fails on one it does not test.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#ifdef WITH_CUDA
#define DLRMBENCH_CUDA_IMPL(name, fn) \
  TORCH_LIBRARY_IMPL(dlrmbench, CUDA, m) { m.impl(name, &fn); }
#else
#define DLRMBENCH_CUDA_IMPL(name, fn)
#endif

#define DLRMBENCH_COMPOSED(name, fn)                                                    \
  DLRMBENCH_CUDA_IMPL(name, fn)                                                         \
  TORCH_LIBRARY_FRAGMENT(dlrmbench_composed, m) { m.def(name, TORCH_FN(fn)); }

namespace dlrmbench {

// A dlrmbench op by name, for a composition that calls another op through the dispatcher (each backend's kernel runs).
inline c10::OperatorHandle dispatcher_op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "");
}

}  // namespace dlrmbench
