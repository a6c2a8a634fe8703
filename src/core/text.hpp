// Small text helpers shared by the backends: a stable hash and JSON string literals.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace sqllock::detail {

/// 64-bit FNV-1a: stable across processes, builds and machines (channel names, advisory-lock keys,
/// wake-up bytes, prepared statement names).
constexpr std::uint64_t fnv1a(std::string_view bytes, std::uint64_t seed = 14695981039346656037ull) noexcept {
  std::uint64_t h = seed;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

/// `s` as a JSON string literal (quotes, backslashes and control characters escaped; other bytes
/// as they are).
std::string json_quote(std::string_view s);

}  // namespace sqllock::detail
