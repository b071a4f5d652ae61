// How a run stores (and so moves) its weights and its KV cache: fp16, or FlexGen's 4-bit
// group-wise format (asymmetric min/max, groups of 64, 36 bytes per 64 values; the exact recipe is
// kernels/quantize_args.h). A user's choice, not the planner's: the planner plans the bytes it
// gives.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace offgen {

enum class Storage { fp16, int4 };

struct Compression {
  // Every 2-D weight (embeddings included) grouped along HF's output dimension; the decoder
  // layers are kept, moved and streamed packed and expanded to fp16 one layer at a time.
  Storage weights = Storage::fp16;
  // Each cached token's k and v head rows grouped along head_dim; kept and moved packed.
  Storage kv = Storage::fp16;

  bool operator==(const Compression&) const = default;
};

inline const char* storage_name(Storage storage) {
  switch (storage) {
    case Storage::fp16:
      return "fp16";
    case Storage::int4:
      return "int4";
  }
  return "?";
}

// "fp16", "int4 weights", "int4 KV", "int4 weights + KV": for logs, tables and reports.
inline std::string compression_name(const Compression& c) {
  const bool w = c.weights == Storage::int4;
  const bool kv = c.kv == Storage::int4;
  if (w && kv) return "int4 weights + KV";
  if (w) return "int4 weights";
  if (kv) return "int4 KV";
  return "fp16";
}

// The settings' names on the command line (compare --storages) and in reports: fp16,
// int4-weights, int4-kv, int4 (both).
inline const char* compression_setting(const Compression& c) {
  const bool w = c.weights == Storage::int4;
  const bool kv = c.kv == Storage::int4;
  if (w && kv) return "int4";
  if (w) return "int4-weights";
  if (kv) return "int4-kv";
  return "fp16";
}

inline std::optional<Compression> parse_compression_setting(std::string_view name) {
  if (name == "fp16") return Compression{};
  if (name == "int4-weights") return Compression{Storage::int4, Storage::fp16};
  if (name == "int4-kv") return Compression{Storage::fp16, Storage::int4};
  if (name == "int4") return Compression{Storage::int4, Storage::int4};
  return std::nullopt;
}

}  // namespace offgen
