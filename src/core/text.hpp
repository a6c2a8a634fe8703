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

/// True when `s` starts or ends with ASCII white space (space, \t, \n, \v, \f, \r): text that
/// PostgreSQL's number input and SQLite's type affinity trim before reading it as a number, so
/// that " 1" would select row 1. Keys are exact values: such a key for a number column is refused.
constexpr bool space_around(std::string_view s) noexcept {
  const auto space = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); };
  return !s.empty() && (space(s.front()) || space(s.back()));
}

/// The refusal of a key that is text with space around it (space_around) for a column of `table`
/// that holds numbers.
inline std::string spaced_number_key_refusal(const std::string& what, const std::string& column,
                                             const std::string& table) {
  return what + ": column " + column + " of table " + table +
         " holds numbers and a key is text with space around it: a key is an exact value, not trimmed; give it "
         "as a number, or as text with nothing around it. Nothing was written or locked";
}

/// `s` as a JSON string literal (quotes, backslashes and control characters escaped; other bytes
/// as they are).
std::string json_quote(std::string_view s);

}  // namespace sqllock::detail
