// Row names of reader-writer leases (see rw_name.hpp).
#include "core/rw_name.hpp"

#include "core/derived_name.hpp"

#include <cstdio>

namespace sqllock::detail {

namespace {
constexpr std::string_view prefix = "sqllock.rwlock.";

std::string base(std::string_view name) { return derived_base(prefix, name); }
}  // namespace

std::string rw_writer_row(std::string_view name) { return derived_padded(base(name) + ".writer"); }

std::string rw_fence_row(std::string_view name) { return derived_padded(base(name) + ".fence"); }

std::string rw_reader_row(std::string_view name, std::string_view client_nonce, std::uint64_t scope) {
  // Fixed width, so that every reader row of one name has the same length (none is a prefix of
  // another: the writer's drain can look on either side of its own reader row).
  char digits[21];
  std::snprintf(digits, sizeof digits, "%020llu", static_cast<unsigned long long>(scope));
  return derived_padded(base(name) + ".reader." + std::string(client_nonce) + "." + digits);
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

std::optional<std::pair<std::string_view, rw_row>> rw_row_of(std::string_view row_name) {
  const auto parsed = derived_parse(prefix, row_name);
  if (!parsed) return std::nullopt;
  const auto [name, rest] = *parsed;
  if (rest.starts_with(".writer")) return std::pair{name, rw_row::writer};
  if (rest.starts_with(".reader.")) return std::pair{name, rw_row::reader};
  if (rest.starts_with(".fence")) return std::pair{name, rw_row::fence};
  return std::nullopt;
}

std::optional<std::string> rw_queue_of(std::string_view row_name) {
  const auto row = rw_row_of(row_name);
  if (!row || row->second == rw_row::fence) return std::nullopt;
  return row->second == rw_row::writer ? rw_reader_wait_key(row->first) : rw_drain_key(row->first);
}

}  // namespace sqllock::detail
