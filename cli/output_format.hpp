// Text and JSON rendering for `sqllock status`: escaping of arbitrary names and human durations.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "sqllock/client.hpp"

namespace sqllock_cli {

/// `text` as a JSON string literal (with the quotes): quotes, backslashes and control characters
/// escaped; bytes that are not valid UTF-8 become U+FFFD so the output is always valid JSON.
std::string json_string(std::string_view text);

/// Safe for a terminal: control characters, DEL and invalid UTF-8 bytes written as \xNN
/// (and a backslash as \\), everything else as is.
std::string printable(std::string_view text);

/// "850ms", "12.3s", "5m03s", "2h05m", or "expired" when negative.
std::string human_duration(std::chrono::milliseconds d);

/// The locks as a JSON array of {"name","holder","fencing_token","hold_count","time_left_ms"}.
std::string locks_json(const std::vector<sqllock::lock_info>& locks);

/// The locks as an aligned table with a header line (just the header when empty).
std::string locks_table(const std::vector<sqllock::lock_info>& locks);

}  // namespace sqllock_cli
