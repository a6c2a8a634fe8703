// Decoding of derived lock-table row names for `sqllock status` (see status_rows.hpp). The row name
// formats are the library's (src/core/rw_name.cpp, permit_name.cpp): a 256-byte minimum (one more
// than the longest lock name, '.'-padded), a prefix, the user's name after its length in bytes.
#include "status_rows.hpp"

#include <algorithm>
#include <cstddef>
#include <charconv>
#include <optional>
#include <tuple>

namespace sqllock_cli {

namespace {

constexpr std::size_t min_row_name = 256;

/// After `prefix`: "<bytes>.<name>" then the rest; the name and the rest, or nullopt.
std::optional<std::pair<std::string_view, std::string_view>> split_named(std::string_view row, std::string_view prefix) {
  if (row.size() < min_row_name || !row.starts_with(prefix)) return std::nullopt;
  std::string_view rest = row.substr(prefix.size());
  std::size_t len = 0;
  const auto [p, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), len);
  if (ec != std::errc() || p == rest.data() || p == rest.data() + rest.size() || *p != '.') return std::nullopt;
  rest.remove_prefix(static_cast<std::size_t>(p - rest.data()) + 1);
  if (len == 0 || rest.size() < len) return std::nullopt;
  return std::pair{rest.substr(0, len), rest.substr(len)};
}

}  // namespace

status_row status_row_of(const sqllock::lock_info& row) {
  status_row out;
  out.lock = row;
  if (const auto rw = split_named(row.name, "sqllock.rwlock.")) {
    const auto [name, rest] = *rw;
    if (rest.starts_with(".writer") || rest.starts_with(".reader.")) {
      out.lock.name = std::string(name);
      out.what = status_row::kind::read_write;
      out.shared = rest.starts_with(".reader.");
      return out;
    }
  }
  if (const auto sem = split_named(row.name, "sqllock.semaphore.")) {
    const auto [name, rest] = *sem;
    constexpr std::string_view permit = ".permit.";
    int slot = -1;
    if (rest.starts_with(permit)) {
      const auto digits = rest.substr(permit.size());
      const auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), slot);
      if (ec == std::errc() && p != digits.data() && slot >= 0) {
        out.lock.name = std::string(name);
        out.what = status_row::kind::semaphore;
        out.permit = slot;
        return out;
      }
    }
  }
  return out;
}

std::vector<status_row> status_rows(const std::vector<sqllock::lock_info>& locks) {
  std::vector<status_row> rows;
  rows.reserve(locks.size());
  for (const auto& l : locks) rows.push_back(status_row_of(l));
  const auto key = [](const status_row& r) {
    const int group = r.what == status_row::kind::lock ? 0 : r.what == status_row::kind::read_write ? (r.shared ? 2 : 1) : 3;
    return std::tuple(std::string_view(r.lock.name), group, r.permit, r.lock.fencing_token);
  };
  std::stable_sort(rows.begin(), rows.end(), [&](const status_row& a, const status_row& b) { return key(a) < key(b); });
  // Sorted: the rows of one name are adjacent.
  for (std::size_t begin = 0, end = 0; begin < rows.size(); begin = end) {
    int readers = 0;
    for (end = begin; end < rows.size() && rows[end].lock.name == rows[begin].lock.name; ++end) {
      if (rows[end].what == status_row::kind::read_write && rows[end].shared) ++readers;
    }
    // The client of an owner id "<client nonce>.<n>": a client's own readers beside its writer are a
    // downgrade (write, then read while still writing), another client's are a drain in progress.
    const auto client_of = [](const std::string& owner) { return owner.substr(0, owner.find('.')); };
    for (std::size_t i = begin; i < end; ++i) {
      if (rows[i].what != status_row::kind::read_write) continue;
      rows[i].readers = readers;
      if (rows[i].shared) continue;
      for (std::size_t j = begin; j < end; ++j) {
        if (rows[j].what == status_row::kind::read_write && rows[j].shared &&
            client_of(rows[j].lock.owner) != client_of(rows[i].lock.owner)) {
          rows[i].waiting = true;
        }
      }
    }
  }
  return rows;
}

std::string mode_text(const status_row& row) {
  switch (row.what) {
    case status_row::kind::lock:
      return "";
    case status_row::kind::read_write:
      if (!row.shared) return row.waiting ? "exclusive (waiting for readers)" : "exclusive";
      return "shared (" + std::to_string(row.readers) + (row.readers == 1 ? " reader)" : " readers)");
    case status_row::kind::semaphore:
      return "permit " + std::to_string(row.permit);
  }
  return "";
}

}  // namespace sqllock_cli
