// How a run stores (and so moves) its weights and its KV cache: fp16, FlexGen's 4-bit
// group-wise format (asymmetric min/max, groups of 64, 36 bytes per 64 values; the exact recipe is
// kernels/quantize_args.h), or for weights int8 per output channel (kernels/int8_matrix.h: about
// half the bytes, multiplied in int8 by the cpu device). A user's choice, not the planner's: the
// planner plans the bytes it gives.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace offgen {

enum class Storage { fp16, int4, int8 };

struct Compression {
  // int4: every 2-D weight (embeddings included) grouped along HF's output dimension; the decoder
  // layers are kept, moved and streamed packed and expanded to fp16 one layer at a time.
  // int8: the decoder layers' matrices, kept, moved and streamed packed and multiplied as they
  // are (never expanded); the embeddings and the LM head stay fp16.
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
    case Storage::int8:
      return "int8";
  }
  return "?";
}

// "fp16", "int4 weights", "int4 KV", "int4 weights + KV", "int8 weights", "int8 weights +
// int4 KV": for logs, tables and reports.
inline std::string compression_name(const Compression& c) {
  const bool kv = c.kv == Storage::int4;
  if (c.weights == Storage::fp16) return kv ? "int4 KV" : "fp16";
  const std::string weights = std::string(storage_name(c.weights)) + " weights";
  return kv ? weights + (c.weights == Storage::int4 ? " + KV" : " + int4 KV") : weights;
}

// The settings' names on the command line (compare --storages) and in reports: fp16,
// int4-weights, int4-kv, int4 (both), int8-weights, int8-weights+int4-kv.
inline const char* compression_setting(const Compression& c) {
  const bool kv = c.kv == Storage::int4;
  switch (c.weights) {
    case Storage::fp16:
      return kv ? "int4-kv" : "fp16";
    case Storage::int4:
      return kv ? "int4" : "int4-weights";
    case Storage::int8:
      return kv ? "int8-weights+int4-kv" : "int8-weights";
  }
  return "?";
}

inline std::optional<Compression> parse_compression_setting(std::string_view name) {
  for (const Storage weights : {Storage::fp16, Storage::int4, Storage::int8}) {
    for (const Storage kv : {Storage::fp16, Storage::int4}) {
      if (name == compression_setting(Compression{weights, kv})) return Compression{weights, kv};
    }
  }
  return std::nullopt;
}

}  // namespace offgen
