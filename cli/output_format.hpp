// Text and JSON rendering for `sqllock status`: escaping of arbitrary names and human durations.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "sqllock/client.hpp"
#include "status_rows.hpp"

namespace sqllock_cli {

/// `text` as a JSON string literal (with the quotes): quotes, backslashes and control characters
/// escaped; bytes that are not valid UTF-8 become U+FFFD so the output is always valid JSON.
std::string json_string(std::string_view text);

/// Safe for a terminal: control characters, DEL and invalid UTF-8 bytes written as \xNN
/// (and a backslash as \\), everything else as is.
std::string printable(std::string_view text);

/// Columns `text` (UTF-8) takes on a terminal: 2 for East Asian wide and fullwidth characters
/// and wide emoji, 0 for combining marks and zero-width characters, 1 otherwise.
std::size_t display_width(std::string_view text);

/// "850ms", "12.3s", "5m03s", "2h05m", or "expired" when negative.
std::string human_duration(std::chrono::milliseconds d);

/// The locks as a JSON array of {"name","holder","owner","fencing_token","hold_count","acquired_at",
/// "expires_at","time_left_ms"}; the times as RFC 3339 UTC strings with milliseconds
/// ("2026-11-25T12:34:56.789Z", the database's clock), null when unknown.
/// Fair-mode waiters (client::list_queue), when any wait on a listed lock, as a "waiters" array on
/// its object: [{"holder","seq","waited_ms"}] in queue order; locks without waiters have no field.
/// Reader-writer and semaphore rows (status_rows.hpp) carry the user's name and, added after
/// "time_left_ms": "mode": "exclusive" | "shared" with "readers": N | "permit" with "permit": K;
/// a plain lock's object has no "mode".
std::string locks_json(const std::vector<sqllock::lock_info>& locks, const std::vector<sqllock::queue_info>& queue = {});
std::string locks_json(const std::vector<status_row>& locks, const std::vector<sqllock::queue_info>& queue = {});

/// The locks as a table with a header line (just the header when empty), its columns aligned by
/// display width: NAME, HOLDER, FENCE, ACQUIRED (UTC), EXPIRES (UTC), TIME LEFT.
/// When fair-mode waiters are queued (client::list_queue), a second table follows after a blank
/// line: WAITING FOR, POS (1 = next), WAITER, WAITED.
/// A MODE column follows NAME when a reader-writer lease or a semaphore is listed (mode_text).
std::string locks_table(const std::vector<sqllock::lock_info>& locks, const std::vector<sqllock::queue_info>& queue = {});
std::string locks_table(const std::vector<status_row>& locks, const std::vector<sqllock::queue_info>& queue = {});

}  // namespace sqllock_cli
