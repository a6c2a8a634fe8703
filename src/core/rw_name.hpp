// Reader-writer leases on the lease engine: the writer of lock L and each reader of L are ordinary
// lease rows of the lock table under derived names that no lock name (nor a semaphore permit) can
// be; the readers of L share a prefix, so "is any reader of L live" is one range query.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace sqllock::detail {

/// The lock-table name of the writer row of `name` (a valid lock name):
/// "sqllock.rwlock.<bytes of L>.<L>.writer", padded with '.' to 256 bytes (longer than any lock
/// name; the length prefix makes it unambiguous for any L).
std::string rw_writer_row(std::string_view name);

/// The reader row of `name` for one holder scope of one client (`client_nonce`: the client's random
/// id, 32 hex digits; `scope`: the holder scope, 20 digits): "sqllock.rwlock.<bytes of L>.<L>.reader.
/// <nonce>.<scope>", padded to 256 bytes. At most 255 + 80 bytes (the lock table takes 511).
std::string rw_reader_row(std::string_view name, std::string_view client_nonce, std::uint64_t scope);

/// The fence row of `name`: "sqllock.rwlock.<bytes of L>.<L>.fence", padded to 256 bytes. Never a
/// lease (no holder): its token is the one fencing counter of the name, which every acquisition of
/// the read or the write lock advances and takes its token from, so each gets a token above every
/// token the name had before (DESIGN.md, Safety). It lies in rw_rows_range, outside rw_reader_range.
std::string rw_fence_row(std::string_view name);

/// The range [lo, hi) holding every reader row of `name` and nothing else (bytewise order).
std::pair<std::string, std::string> rw_reader_range(std::string_view name);

/// The range [lo, hi) holding the writer row and every reader row of `name`, and nothing else.
std::pair<std::string, std::string> rw_rows_range(std::string_view name);

/// Local wait-queue keys (never sent to the database): where readers wait for the writer to go, and
/// where a writer waits for the readers to drain.
std::string rw_reader_wait_key(std::string_view name);
std::string rw_drain_key(std::string_view name);

/// The rows of a reader-writer lock.
enum class rw_row { writer, reader, fence };

/// If `row_name` is a row of a reader-writer lock: that lock's name and which row it is. A view
/// into `row_name`.
std::optional<std::pair<std::string_view, rw_row>> rw_row_of(std::string_view row_name);

/// If `row_name` is a writer row: its reader-wait key; a reader row: its drain key (woken when the
/// row is released).
std::optional<std::string> rw_queue_of(std::string_view row_name);

}  // namespace sqllock::detail
