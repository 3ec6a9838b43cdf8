// The counter-based hash behind counter_uniform (counter_uniform.cpp); reference.py mirrors it in int64 torch ops.
#pragma once

#include <cstdint>

namespace dlrmbench {

inline uint32_t fmix32(uint32_t h) {
  h ^= h >> 16;
  h *= 0x85EBCA6Bu;
  h ^= h >> 13;
  h *= 0xC2B2AE35u;
  h ^= h >> 16;
  return h;
}

struct CounterKey {
  uint32_t s0, s1;
  double low, span;
  CounterKey(int64_t seed, float lo, float hi)
      : s0(static_cast<uint32_t>(static_cast<uint64_t>(seed))),
        s1(static_cast<uint32_t>(static_cast<uint64_t>(seed) >> 32)),
        low(lo),
        span(static_cast<double>(hi) - static_cast<double>(lo)) {}
  uint32_t row(int64_t r) const {
    const uint64_t u = static_cast<uint64_t>(r);
    const uint32_t a = fmix32(static_cast<uint32_t>(u) ^ s0);
    return fmix32(static_cast<uint32_t>(u >> 32) ^ s1 ^ a);
  }
  float value(uint32_t row_hash, int64_t col) const {
    const uint32_t h = fmix32((static_cast<uint32_t>(col) * 0x9E3779B1u) ^ row_hash);
    return static_cast<float>(low + span * (static_cast<double>(h >> 8) * 0x1p-24));
  }
};

}  // namespace dlrmbench
