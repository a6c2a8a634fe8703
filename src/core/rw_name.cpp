// Row names of reader-writer leases (see rw_name.hpp).
#include "core/rw_name.hpp"

#include <charconv>
#include <cstdio>

namespace sqllock::detail {

namespace {
constexpr std::string_view prefix = "sqllock.rwlock.";
constexpr std::size_t min_row_name = 256;  // one more than the longest lock name

std::string base(std::string_view name) {
  std::string out(prefix);
  out += std::to_string(name.size());
  out += '.';
  out.append(name);
  return out;
}

std::string padded(std::string s) {
  if (s.size() < min_row_name) s.append(min_row_name - s.size(), '.');
  return s;
}
}  // namespace

std::string rw_writer_row(std::string_view name) { return padded(base(name) + ".writer"); }

std::string rw_reader_row(std::string_view name, std::string_view client_nonce, std::uint64_t scope) {
  // Fixed width, so that every reader row of one name has the same length (none is a prefix of
  // another: the writer's drain can look on either side of its own reader row).
  char digits[21];
  std::snprintf(digits, sizeof digits, "%020llu", static_cast<unsigned long long>(scope));
  return padded(base(name) + ".reader." + std::string(client_nonce) + "." + digits);
}

std::pair<std::string, std::string> rw_reader_range(std::string_view name) {
  std::string lo = base(name) + ".reader.";
  std::string hi = lo;
  hi.back() = '/';  // the byte after '.'
  return {std::move(lo), std::move(hi)};
}

std::pair<std::string, std::string> rw_rows_range(std::string_view name) {
  std::string lo = base(name) + ".";
  std::string hi = lo;
  hi.back() = '/';
  return {std::move(lo), std::move(hi)};
}

std::string rw_reader_wait_key(std::string_view name) { return base(name) + ".readers-wait"; }
std::string rw_drain_key(std::string_view name) { return base(name) + ".drain"; }

std::optional<std::string> rw_queue_of(std::string_view row_name) {
  if (row_name.size() < min_row_name || !row_name.starts_with(prefix)) return std::nullopt;
  std::string_view rest = row_name.substr(prefix.size());
  std::size_t len = 0;
  const auto [p, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), len);
  if (ec != std::errc() || p == rest.data() || *p != '.') return std::nullopt;
  rest.remove_prefix(static_cast<std::size_t>(p - rest.data()) + 1);
  if (rest.size() < len) return std::nullopt;
  const std::string_view name = rest.substr(0, len);
  rest.remove_prefix(len);
  if (rest.starts_with(".writer")) return rw_reader_wait_key(name);
  if (rest.starts_with(".reader.")) return rw_drain_key(name);
  return std::nullopt;
}

}  // namespace sqllock::detail
