// Byte sizes as users write them ("16GiB", "512MB", "1.5G") and as we print them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace offgen {

// Accepts an integer or decimal number with an optional unit: B, KB/MB/GB/TB (powers of 1000),
// KiB/MiB/GiB/TiB and K/M/G/T (powers of 1024). Throws offgen::Error naming the text otherwise.
std::uint64_t parse_bytes(std::string_view text);

// "1.50 GiB", "512 MiB", "12 B".
std::string format_bytes(std::uint64_t bytes);

}  // namespace offgen
