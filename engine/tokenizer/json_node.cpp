#include "engine/tokenizer/json_node.h"

namespace offgen {

JsonNode JsonNode::at(std::string_view key) const {
  if (!value_->is_object()) error("expected a JSON object, got {}", value_->type_name());
  const auto it = value_->find(key);
  if (it == value_->end()) error("missing \"{}\"", key);
  return JsonNode(*it, file_, path_.empty() ? std::string(key) : path_ + "." + std::string(key));
}

std::optional<JsonNode> JsonNode::find(std::string_view key) const {
  if (!value_->is_object()) error("expected a JSON object, got {}", value_->type_name());
  const auto it = value_->find(key);
  if (it == value_->end() || it->is_null()) return std::nullopt;
  return JsonNode(*it, file_, path_.empty() ? std::string(key) : path_ + "." + std::string(key));
}

JsonNode JsonNode::operator[](std::size_t i) const {
  return JsonNode((*value_)[i], file_, path_ + "[" + std::to_string(i) + "]");
}

std::size_t JsonNode::size() const {
  if (!value_->is_array()) error("expected a JSON array, got {}", value_->type_name());
  return value_->size();
}

std::string JsonNode::string() const {
  if (!value_->is_string()) error("expected a string, got {}", value_->dump());
  return value_->get<std::string>();
}

bool JsonNode::boolean() const {
  if (!value_->is_boolean()) error("expected true or false, got {}", value_->dump());
  return value_->get<bool>();
}

double JsonNode::number() const {
  if (!value_->is_number()) error("expected a number, got {}", value_->dump());
  return value_->get<double>();
}

std::size_t JsonNode::size_value() const {
  if (!value_->is_number_unsigned()) {
    error("expected a non-negative integer, got {}", value_->dump());
  }
  return value_->get<std::size_t>();
}

std::string JsonNode::type() const {
  return at("type").string();
}

void JsonNode::unsupported(std::string_view component, std::string_view type,
                           std::string_view supported) const {
  error("unsupported {} {:?} (offgen supports {})", component, type, supported);
}

}  // namespace offgen
