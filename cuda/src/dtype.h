// Element types of checkpoint tensors and their conversions. Kept tiny: the loader and every backend use it.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace vt {

enum class DType : uint8_t { F32, F16, BF16 };

inline size_t dtype_size(DType t) { return t == DType::F32 ? 4 : 2; }

inline const char *dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "float32";
    case DType::F16: return "float16";
    case DType::BF16: return "bfloat16";
  }
  return "?";
}

// safetensors spells them F32 / F16 / BF16.
inline bool dtype_from_safetensors(std::string_view s, DType *out) {
  if (s == "F32") { *out = DType::F32; return true; }
  if (s == "F16") { *out = DType::F16; return true; }
  if (s == "BF16") { *out = DType::BF16; return true; }
  return false;
}

inline float bf16_to_f32(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// IEEE half → float, exact for every value (normals, subnormals, inf, nan).
inline float f16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t u;
  if (exp == 0) {
    if (mant == 0) {
      u = sign;
    } else {  // subnormal: renormalise
      int e = -1;
      do { mant <<= 1; ++e; } while (!(mant & 0x400));
      u = sign | uint32_t(127 - 15 - e) << 23 | (mant & 0x3ff) << 13;
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | mant << 13;
  } else {
    u = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float load_as_f32(const void *p, DType t, int64_t i) {
  switch (t) {
    case DType::F32: return static_cast<const float *>(p)[i];
    case DType::F16: return f16_to_f32(static_cast<const uint16_t *>(p)[i]);
    case DType::BF16: return bf16_to_f32(static_cast<const uint16_t *>(p)[i]);
  }
  return 0.f;
}

}  // namespace vt
