#include "tests/support/gguf_writer.h"

#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "engine/core/half.h"
#include "engine/model/checkpoint.h"
#include "engine/model/gguf_file.h"
#include "engine/model/gguf_types.h"
#include "engine/model/model_tensors.h"

namespace offgen::test {
namespace {

using Json = nlohmann::json;

template <typename T>
void put(std::vector<std::byte>& out, T value) {
  std::byte raw[sizeof(T)];
  std::memcpy(raw, &value, sizeof(T));  // the test machines are little-endian
  out.insert(out.end(), raw, raw + sizeof(T));
}

void put_string(std::vector<std::byte>& out, const std::string& text) {
  put<std::uint64_t>(out, text.size());
  const auto* p = reinterpret_cast<const std::byte*>(text.data());
  out.insert(out.end(), p, p + text.size());
}

void put_value(std::vector<std::byte>& out, GgufWriter::Type type, const Json& value) {
  using Type = GgufWriter::Type;
  switch (type) {
    case Type::u8:
      put(out, value.get<std::uint8_t>());
      return;
    case Type::i8:
      put(out, value.get<std::int8_t>());
      return;
    case Type::u16:
      put(out, value.get<std::uint16_t>());
      return;
    case Type::i16:
      put(out, value.get<std::int16_t>());
      return;
    case Type::u32:
      put(out, value.get<std::uint32_t>());
      return;
    case Type::i32:
      put(out, value.get<std::int32_t>());
      return;
    case Type::f32:
      put(out, value.get<float>());
      return;
    case Type::boolean:
      put<std::uint8_t>(out, value.get<bool>() ? 1 : 0);
      return;
    case Type::string:
      put_string(out, value.get<std::string>());
      return;
    case Type::u64:
      put(out, value.get<std::uint64_t>());
      return;
    case Type::i64:
      put(out, value.get<std::int64_t>());
      return;
    case Type::f64:
      put(out, value.get<double>());
      return;
    case Type::array:
      break;
  }
  throw std::logic_error("put_value: nested arrays are written by add()");
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

void GgufWriter::add(const std::string& key, Type type, const Json& value, Type element) {
  entries_.push_back({key, type, element, value});
}

void GgufWriter::add_tensor(const std::string& name, std::vector<std::int64_t> dims,
                            std::uint32_t type, std::vector<std::byte> data) {
  tensors_.push_back({name, std::move(dims), type, std::move(data)});
}

std::vector<std::byte> GgufWriter::bytes() const {
  std::vector<std::byte> out;
  put<std::uint32_t>(out, 0x46554747);
  put<std::uint32_t>(out, version);
  put<std::uint64_t>(out, tensors_.size());
  put<std::uint64_t>(out, entries_.size());
  for (const Entry& e : entries_) {
    put_string(out, e.key);
    put<std::uint32_t>(out, static_cast<std::uint32_t>(e.type));
    if (e.type == Type::array) {
      put<std::uint32_t>(out, static_cast<std::uint32_t>(e.element));
      put<std::uint64_t>(out, e.value.size());
      for (const Json& item : e.value) put_value(out, e.element, item);
    } else {
      put_value(out, e.type, e.value);
    }
  }
  std::uint64_t offset = 0;
  std::vector<std::uint64_t> offsets;
  for (const Tensor& t : tensors_) {
    put_string(out, t.name);
    put<std::uint32_t>(out, static_cast<std::uint32_t>(t.dims.size()));
    for (const std::int64_t d : t.dims) put<std::uint64_t>(out, static_cast<std::uint64_t>(d));
    put<std::uint32_t>(out, t.type);
    put<std::uint64_t>(out, offset);
    offsets.push_back(offset);
    offset = (offset + t.data.size() + alignment - 1) / alignment * alignment;
  }
  out.resize((out.size() + alignment - 1) / alignment * alignment);
  const std::size_t data_start = out.size();
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    out.resize(data_start + offsets[i]);
    out.insert(out.end(), tensors_[i].data.begin(), tensors_[i].data.end());
  }
  return out;
}

void GgufWriter::write(const std::filesystem::path& path) const {
  const std::vector<std::byte> data = bytes();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  if (!out) throw std::runtime_error("could not write " + path.string());
}

void add_gpt2_tokenizer(GgufWriter& w, const std::filesystem::path& dir, const std::string& pre,
                        const std::vector<std::string>& control) {
  using Type = GgufWriter::Type;
  // vocab.json's tokens by id, merges.txt's lines.
  const Json vocab = Json::parse(read_text(dir / "vocab.json"));
  std::vector<std::string> tokens(vocab.size());
  for (const auto& [token, id] : vocab.items()) tokens.at(id.get<std::size_t>()) = token;
  Json merges = Json::array();
  std::istringstream lines(read_text(dir / "merges.txt"));
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && !line.starts_with("#version")) merges.push_back(line);
  }
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", pre);
  std::vector<int> types(tokens.size(), 1);  // NORMAL
  tokens.insert(tokens.end(), control.begin(), control.end());
  types.resize(tokens.size(), 3);  // CONTROL
  w.add("tokenizer.ggml.tokens", Type::array, tokens, Type::string);
  w.add("tokenizer.ggml.token_type", Type::array, types, Type::i32);
  w.add("tokenizer.ggml.merges", Type::array, merges, Type::string);
}

void convert_gguf_from_checkpoint(const std::filesystem::path& dir,
                                  const std::filesystem::path& out, GgufStorage storage) {
  const auto checkpoint = Checkpoint::open(dir);
  const ModelConfig& c = checkpoint->config();
  const std::string arch = c.model_type;
  using Type = GgufWriter::Type;
  GgufWriter w;
  w.add_string("general.architecture", arch);
  w.add_string("general.name", dir.filename().string());
  const auto key = [&arch](const char* name) { return fmt::format("{}.{}", arch, name); };
  w.add_u32(key("context_length"), static_cast<std::uint32_t>(c.max_position_embeddings));
  w.add_u32(key("embedding_length"), static_cast<std::uint32_t>(c.hidden_size));
  w.add_u32(key("block_count"), static_cast<std::uint32_t>(c.num_layers));
  w.add_u32(key("feed_forward_length"), static_cast<std::uint32_t>(c.ffn_dim));
  w.add_u32(key("attention.head_count"), static_cast<std::uint32_t>(c.num_heads));
  w.add_u32(key("attention.head_count_kv"), static_cast<std::uint32_t>(c.kv_heads()));
  w.add_u32(key("rope.dimension_count"), static_cast<std::uint32_t>(c.head_dim()));
  w.add_f32(key("rope.freq_base"), c.rope_theta);
  w.add_f32(key("attention.layer_norm_rms_epsilon"), c.layer_norm_eps);
  if (c.sliding_window > 0) {
    w.add_u32(key("attention.sliding_window"), static_cast<std::uint32_t>(c.sliding_window));
  }
  if (c.rope_scaling.kind == RopeScaling::Kind::linear) {
    w.add_string(key("rope.scaling.type"), "linear");
    w.add_f32(key("rope.scaling.factor"), c.rope_scaling.factor);
  }

  add_gpt2_tokenizer(w, dir, "default");
  // A text prompt of these checkpoints starts with the BOS (vocab.json has no template, so the
  // engine prepends the config's); llama.cpp's converter says so with add_bos_token.
  w.add_bool("tokenizer.ggml.add_bos_token", true);
  w.add_u32("tokenizer.ggml.bos_token_id", static_cast<std::uint32_t>(c.bos_token_id));
  w.add_u32("tokenizer.ggml.eos_token_id", static_cast<std::uint32_t>(c.eos_token_id));
  if (c.has_pad_token) {
    w.add_u32("tokenizer.ggml.padding_token_id", static_cast<std::uint32_t>(c.pad_token_id));
  }

  const std::pair<const char*, const char*> kLayer[] = {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.k_proj.weight", "attn_k.weight"},
      {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.q_proj.bias", "attn_q.bias"},
      {"self_attn.k_proj.bias", "attn_k.bias"},
      {"self_attn.v_proj.bias", "attn_v.bias"},
      {"self_attn.o_proj.weight", "attn_output.weight"},
      {"post_attention_layernorm.weight", "ffn_norm.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},
      {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"},
  };
  for (const TensorSpec& spec : model_tensor_specs(c)) {
    std::string name;
    if (spec.name == "embed_tokens.weight") name = "token_embd.weight";
    if (spec.name == "norm.weight") name = "output_norm.weight";
    if (spec.name == "lm_head.weight") name = "output.weight";
    if (spec.name.starts_with("layers.")) {
      const std::size_t dot = spec.name.find('.', 7);
      const std::string rest = spec.name.substr(dot + 1);
      for (const auto& [hf, gguf] : kLayer) {
        if (rest == hf) name = "blk." + spec.name.substr(7, dot - 7) + "." + gguf;
      }
    }
    if (name.empty()) throw std::runtime_error("no GGUF name for " + spec.name);
    std::vector<Half> values(static_cast<std::size_t>(spec.numel()));
    checkpoint->read_f16(spec.name, spec.shape, values.data());
    // llama.cpp's permute: rows (head, t, i) -> (head, i, t) for q and k of llama and mistral.
    const bool permute = arch != "qwen2" && (spec.name.ends_with("q_proj.weight") ||
                                             spec.name.ends_with("k_proj.weight"));
    const std::int64_t columns = spec.shape.size() == 2 ? spec.shape[1] : spec.shape[0];
    const std::int64_t rows = spec.numel() / columns;
    std::vector<Half> stored(values.size());
    const std::int64_t d = c.head_dim();
    for (std::int64_t r = 0; r < rows; ++r) {
      std::int64_t target = r;
      if (permute) {
        const std::int64_t head = r / d;
        const std::int64_t t = (r % d) / (d / 2);
        const std::int64_t i = (r % d) % (d / 2);
        target = head * d + 2 * i + t;
      }
      std::memcpy(&stored[static_cast<std::size_t>(target * columns)],
                  &values[static_cast<std::size_t>(r * columns)],
                  static_cast<std::size_t>(columns) * sizeof(Half));
    }
    const bool f32 = storage == GgufStorage::f32 || spec.shape.size() == 1;
    std::vector<std::byte> data(stored.size() * (f32 ? 4 : 2));
    for (std::size_t i = 0; i < stored.size(); ++i) {
      if (f32) {
        const float v = half_to_float(stored[i]);
        std::memcpy(&data[4 * i], &v, 4);
      } else {
        std::memcpy(&data[2 * i], &stored[i].bits, 2);
      }
    }
    std::vector<std::int64_t> dims(spec.shape.rbegin(), spec.shape.rend());
    w.add_tensor(name, dims, f32 ? 0u : 1u, std::move(data));
  }
  w.write(out);
}

namespace {

GgufWriter::Type scalar_type(const Json& value) {
  using Type = GgufWriter::Type;
  if (value.is_boolean()) return Type::boolean;
  if (value.is_string()) return Type::string;
  if (value.is_number_float()) {
    const double v = value.get<double>();
    return static_cast<double>(static_cast<float>(v)) == v ? Type::f32 : Type::f64;
  }
  if (value.is_number_unsigned()) {
    return value.get<std::uint64_t>() <= 0xFFFFFFFFu ? Type::u32 : Type::u64;
  }
  const std::int64_t v = value.get<std::int64_t>();
  return v >= INT32_MIN && v <= INT32_MAX ? Type::i32 : Type::i64;
}

}  // namespace

void write_f16_copy(const GgufFile& in, const std::filesystem::path& out) {
  using Type = GgufWriter::Type;
  GgufWriter w;
  w.version = in.version();
  for (const auto& [key, value] : in.metadata()) {
    if (key == "general.file_type") continue;
    if (!value.is_array()) {
      w.add(key, scalar_type(value), value);
      continue;
    }
    Type element = Type::u8;
    for (const Json& item : value) {
      const Type t = scalar_type(item);
      // The widest kind any element needs (f32 < f64, i32 < i64).
      if (element == Type::u8 || t == Type::f64 || t == Type::i64 || t == Type::string) element = t;
    }
    w.add(key, Type::array, value, element);
  }
  w.add_u32("general.file_type", 1);  // LLAMA_FTYPE_MOSTLY_F16
  for (const auto& [name, tensor] : in.tensors()) {
    const bool quantized = tensor.type != GgmlType::f32 && tensor.type != GgmlType::f16;
    if (tensor.dims.size() != 2 || !quantized) {
      w.add_tensor(name, tensor.dims, static_cast<std::uint32_t>(tensor.type),
                   std::vector<std::byte>(tensor.data, tensor.data + tensor.bytes));
      continue;
    }
    const auto n = static_cast<std::size_t>(tensor.numel());
    std::vector<float> values(n);
    dequantize_gguf(tensor.type, tensor.data, values.data(), tensor.numel());
    std::vector<std::byte> data(2 * n);
    for (std::size_t i = 0; i < n; ++i) {
      const Half h = float_to_half(values[i]);
      std::memcpy(&data[2 * i], &h.bits, 2);
    }
    w.add_tensor(name, tensor.dims, static_cast<std::uint32_t>(GgmlType::f16), std::move(data));
  }
  w.write(out);
}

}  // namespace offgen::test
