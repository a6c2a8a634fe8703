// `sqllock status`'s rows (see status_rows.hpp). The derived row name formats are the library's
// alone: sqllock::decode_row_name parses them.
#include "status_rows.hpp"

#include <algorithm>
#include <cstddef>
#include <tuple>

namespace sqllock_cli {

status_row status_row_of(const sqllock::lock_info& row) {
  using sqllock::row_name_info;
  const row_name_info decoded = sqllock::decode_row_name(row.name);
  status_row out;
  out.lock = row;
  out.lock.name = decoded.name;
  switch (decoded.what) {
    case row_name_info::kind::lock:
      break;
    case row_name_info::kind::writer:
    case row_name_info::kind::reader:
      out.what = status_row::kind::read_write;
      out.shared = decoded.what == row_name_info::kind::reader;
      break;
    case row_name_info::kind::rw_fence:
      out.what = status_row::kind::internal;
      break;
    case row_name_info::kind::permit:
      out.what = status_row::kind::semaphore;
      out.permit = decoded.permit;
      break;
  }
  return out;
}

std::vector<status_row> status_rows(const std::vector<sqllock::lock_info>& locks) {
  std::vector<status_row> rows;
  rows.reserve(locks.size());
  for (const auto& l : locks) {
    status_row r = status_row_of(l);
    if (r.what != status_row::kind::internal) rows.push_back(std::move(r));
  }
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
    case status_row::kind::internal:
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
