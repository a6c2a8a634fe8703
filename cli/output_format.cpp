// Text and JSON rendering for `sqllock status`: escaping of arbitrary names and human durations.
#include "output_format.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <iterator>

namespace sqllock_cli {
namespace {

/// Length of the valid UTF-8 sequence starting at text[i], or 0 if the bytes there are not one.
std::size_t utf8_sequence_length(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char b0 = byte(i);
  if (b0 < 0x80) return 1;
  std::size_t len = 0;
  std::uint32_t cp = 0;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2;
    cp = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3;
    cp = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4;
    cp = b0 & 0x07;
  } else {
    return 0;
  }
  if (i + len > text.size()) return 0;
  for (std::size_t k = 1; k < len; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  static constexpr std::array<std::uint32_t, 5> min_for_len{0, 0, 0x80, 0x800, 0x10000};
  if (cp < min_for_len[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

std::string hex_escape(const char* prefix, unsigned value, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%s%0*X", prefix, digits, value);
  return buf;
}

struct code_range {
  std::uint32_t first;
  std::uint32_t last;
};

/// Code points that take no column: combining marks, zero-width and bidi controls, variation
/// selectors (the common ranges; a terminal may differ on rarer ones).
constexpr code_range zero_width[] = {
    {0x0300, 0x036F}, {0x0483, 0x0489}, {0x0591, 0x05BD}, {0x05BF, 0x05BF}, {0x05C1, 0x05C2}, {0x05C4, 0x05C5},
    {0x05C7, 0x05C7}, {0x0610, 0x061A}, {0x064B, 0x065F}, {0x0670, 0x0670}, {0x06D6, 0x06DC}, {0x06DF, 0x06E4},
    {0x06E7, 0x06E8}, {0x06EA, 0x06ED}, {0x0900, 0x0902}, {0x093C, 0x093C}, {0x0941, 0x0948}, {0x094D, 0x094D},
    {0x0E31, 0x0E31}, {0x0E34, 0x0E3A}, {0x0E47, 0x0E4E}, {0x1AB0, 0x1AFF}, {0x1DC0, 0x1DFF}, {0x200B, 0x200F},
    {0x202A, 0x202E}, {0x2060, 0x2064}, {0x20D0, 0x20FF}, {0xFE00, 0xFE0F}, {0xFE20, 0xFE2F}, {0xFEFF, 0xFEFF},
    {0xE0100, 0xE01EF},
};

/// Code points a terminal shows two columns wide (East Asian Wide and Fullwidth, and the emoji
/// that are wide by default), after Unicode's EastAsianWidth.txt.
constexpr code_range double_width[] = {
    {0x1100, 0x115F},   {0x231A, 0x231B},   {0x2329, 0x232A},   {0x23E9, 0x23EC},   {0x23F0, 0x23F0},
    {0x23F3, 0x23F3},   {0x25FD, 0x25FE},   {0x2614, 0x2615},   {0x2648, 0x2653},   {0x267F, 0x267F},
    {0x2693, 0x2693},   {0x26A1, 0x26A1},   {0x26AA, 0x26AB},   {0x26BD, 0x26BE},   {0x26C4, 0x26C5},
    {0x26CE, 0x26CE},   {0x26D4, 0x26D4},   {0x26EA, 0x26EA},   {0x26F2, 0x26F3},   {0x26F5, 0x26F5},
    {0x26FA, 0x26FA},   {0x26FD, 0x26FD},   {0x2705, 0x2705},   {0x270A, 0x270B},   {0x2728, 0x2728},
    {0x274C, 0x274C},   {0x274E, 0x274E},   {0x2753, 0x2755},   {0x2757, 0x2757},   {0x2795, 0x2797},
    {0x27B0, 0x27B0},   {0x27BF, 0x27BF},   {0x2B1B, 0x2B1C},   {0x2B50, 0x2B50},   {0x2B55, 0x2B55},
    {0x2E80, 0x303E},   {0x3041, 0x33FF},   {0x3400, 0x4DBF},   {0x4E00, 0x9FFF},   {0xA000, 0xA4CF},
    {0xA960, 0xA97F},   {0xAC00, 0xD7A3},   {0xF900, 0xFAFF},   {0xFE10, 0xFE19},   {0xFE30, 0xFE6F},
    {0xFF00, 0xFF60},   {0xFFE0, 0xFFE6},   {0x16FE0, 0x16FE4}, {0x17000, 0x18CFF}, {0x1B000, 0x1B2FF},
    {0x1F004, 0x1F004}, {0x1F0CF, 0x1F0CF}, {0x1F18E, 0x1F18E}, {0x1F191, 0x1F19A}, {0x1F200, 0x1F251},
    {0x1F300, 0x1F320}, {0x1F32D, 0x1F335}, {0x1F337, 0x1F37C}, {0x1F37E, 0x1F393}, {0x1F3A0, 0x1F3CA},
    {0x1F3CF, 0x1F3D3}, {0x1F3E0, 0x1F3F0}, {0x1F3F4, 0x1F3F4}, {0x1F3F8, 0x1F43E}, {0x1F440, 0x1F440},
    {0x1F442, 0x1F4FC}, {0x1F4FF, 0x1F53D}, {0x1F54B, 0x1F54E}, {0x1F550, 0x1F567}, {0x1F57A, 0x1F57A},
    {0x1F595, 0x1F596}, {0x1F5A4, 0x1F5A4}, {0x1F5FB, 0x1F64F}, {0x1F680, 0x1F6C5}, {0x1F6CC, 0x1F6CC},
    {0x1F6D0, 0x1F6D2}, {0x1F6D5, 0x1F6D7}, {0x1F6EB, 0x1F6EC}, {0x1F6F4, 0x1F6FC}, {0x1F7E0, 0x1F7EB},
    {0x1F90C, 0x1F93A}, {0x1F93C, 0x1F945}, {0x1F947, 0x1F9FF}, {0x1FA70, 0x1FAFF}, {0x20000, 0x2FFFD},
    {0x30000, 0x3FFFD},
};

template <std::size_t N>
bool in_ranges(std::uint32_t cp, const code_range (&ranges)[N]) {
  const auto it = std::upper_bound(std::begin(ranges), std::end(ranges), cp,
                                   [](std::uint32_t c, const code_range& r) { return c < r.first; });
  return it != std::begin(ranges) && cp <= std::prev(it)->last;
}

/// Columns one code point takes on a terminal (wcwidth's answer for printable characters, without
/// depending on the locale the command runs in: lock names are UTF-8 whatever it is).
std::size_t code_point_width(std::uint32_t cp) {
  if (in_ranges(cp, zero_width)) return 0;
  return in_ranges(cp, double_width) ? 2 : 1;
}

/// RFC 3339 UTC with milliseconds ("2026-11-25T12:34:56.789Z"), or "" for the epoch (unknown).
/// With `millis` false: "2026-11-25T12:34:56Z".
std::string utc_time(std::chrono::system_clock::time_point t, bool millis) {
  if (t == std::chrono::system_clock::time_point{}) return "";
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  const std::time_t secs = static_cast<std::time_t>(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
  const long long frac = ms - static_cast<long long>(secs) * 1000;
  std::tm tm{};
  if (::gmtime_r(&secs, &tm) == nullptr) return "";
  char buf[64];
  const std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::string out(buf, n);
  if (millis) {
    std::snprintf(buf, sizeof buf, ".%03lld", frac);
    out += buf;
  }
  return out + "Z";
}

}  // namespace

std::size_t display_width(std::string_view text) {
  std::size_t width = 0;
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t len = utf8_sequence_length(text, i);
    if (len == 0) {  // not UTF-8 (printable() escapes such bytes before they get here)
      ++width;
      ++i;
      continue;
    }
    auto cp = static_cast<std::uint32_t>(static_cast<unsigned char>(text[i]));
    if (len > 1) {
      cp &= 0x7Fu >> len;
      for (std::size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
    }
    width += code_point_width(cp);
    i += len;
  }
  return width;
}

std::string json_string(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out += '"';
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      const std::size_t len = utf8_sequence_length(text, i);
      if (len == 0) {
        out += "\\ufffd";
        ++i;
      } else {
        out.append(text.substr(i, len));
        i += len;
      }
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7F) {
          out += hex_escape("\\u", c, 4);
        } else {
          out += static_cast<char>(c);
        }
    }
    ++i;
  }
  out += '"';
  return out;
}

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      const std::size_t len = utf8_sequence_length(text, i);
      if (len == 0) {
        out += hex_escape("\\x", c, 2);
        ++i;
      } else {
        out.append(text.substr(i, len));
        i += len;
      }
      continue;
    }
    if (c == '\\') {
      out += "\\\\";
    } else if (c < 0x20 || c == 0x7F) {
      out += hex_escape("\\x", c, 2);
    } else {
      out += static_cast<char>(c);
    }
    ++i;
  }
  return out;
}

std::string human_duration(std::chrono::milliseconds d) {
  const long long ms = d.count();
  char buf[64];
  if (ms < 0) return "expired";
  if (ms < 1000) {
    std::snprintf(buf, sizeof buf, "%lldms", ms);
  } else if (ms < 60'000) {
    // Truncate (not round) so that 59.99s never shows as "60.0s".
    std::snprintf(buf, sizeof buf, "%lld.%llds", ms / 1000, (ms % 1000) / 100);
  } else if (ms < 3'600'000) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", ms / 60'000, (ms / 1000) % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", ms / 3'600'000, (ms / 60'000) % 60);
  }
  return buf;
}

std::string locks_json(const std::vector<sqllock::lock_info>& locks, const std::vector<sqllock::queue_info>& queue) {
  return locks_json(status_rows(locks), queue);
}

std::string locks_json(const std::vector<status_row>& locks, const std::vector<sqllock::queue_info>& queue) {
  if (locks.empty()) return "[]\n";
  std::string out = "[\n";
  for (std::size_t i = 0; i < locks.size(); ++i) {
    const auto& l = locks[i].lock;
    const auto time_or_null = [](std::chrono::system_clock::time_point t) {
      const std::string text = utc_time(t, true);
      return text.empty() ? std::string("null") : json_string(text);
    };
    out += "  {\"name\": " + json_string(l.name) + ", \"holder\": " + json_string(l.holder) +
           ", \"owner\": " + json_string(l.owner) + ", \"fencing_token\": " + std::to_string(l.fencing_token) +
           ", \"hold_count\": " + std::to_string(l.hold_count) + ", \"acquired_at\": " + time_or_null(l.acquired_at) +
           ", \"expires_at\": " + time_or_null(l.expires_at) +
           ", \"time_left_ms\": " + std::to_string(l.time_left.count());
    if (locks[i].what == status_row::kind::read_write) {
      out += locks[i].shared ? ", \"mode\": \"shared\", \"readers\": " + std::to_string(locks[i].readers)
                             : std::string(", \"mode\": \"exclusive\"") + (locks[i].waiting ? ", \"waiting\": true" : "");
    } else if (locks[i].what == status_row::kind::semaphore) {
      out += ", \"mode\": \"permit\", \"permit\": " + std::to_string(locks[i].permit);
    }
    std::string waiting;
    for (const auto& w : queue) {
      if (w.name != l.name || locks[i].what != status_row::kind::lock) continue;
      waiting += std::string(waiting.empty() ? "" : ", ") + "{\"holder\": " + json_string(w.holder) +
                 ", \"seq\": " + std::to_string(w.seq) + ", \"waited_ms\": " + std::to_string(w.waited.count()) + "}";
    }
    if (!waiting.empty()) out += ", \"waiters\": [" + waiting + "]";
    out += "}";
    out += i + 1 < locks.size() ? ",\n" : "\n";
  }
  out += "]\n";
  return out;
}

namespace {

// Rows (the first is the header) in columns two spaces apart, each as wide as its widest cell (by
// display width); the `number` column (a count, a token) is right-aligned like every number, the
// text columns left-aligned with no trailing blanks on the last; the `omitted` column (if any) is
// not printed.
template <std::size_t N>
std::string aligned_table(const std::vector<std::array<std::string, N>>& rows, std::size_t number,
                          std::size_t omitted = N) {
  std::array<std::size_t, N> widths{};
  for (const auto& r : rows) {
    for (std::size_t c = 0; c < N; ++c) widths[c] = std::max(widths[c], display_width(r[c]));
  }
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (std::size_t c = 0; c < N; ++c) {
      if (c == omitted) continue;
      const bool last = c + 1 == N;
      const std::string pad(widths[c] - display_width(r[c]), ' ');
      line += c == number ? pad + r[c] : r[c] + (last ? "" : pad);
      if (!last) line += "  ";
    }
    out += line + "\n";
  }
  return out;
}

// The table of fair-mode waiters: WAITING FOR, POS, WAITER, WAITED (aligned like the lock table).
std::string queue_table(const std::vector<sqllock::queue_info>& queue) {
  using row = std::array<std::string, 4>;
  std::vector<row> rows;
  rows.push_back({"WAITING FOR", "POS", "WAITER", "WAITED"});
  std::string last_name;
  int pos = 0;
  for (const auto& w : queue) {
    pos = (rows.size() > 1 && w.name == last_name) ? pos + 1 : 1;
    last_name = w.name;
    rows.push_back({printable(w.name), std::to_string(pos), printable(w.holder), human_duration(w.waited)});
  }
  return aligned_table(rows, 1);
}

}  // namespace

std::string locks_table(const std::vector<sqllock::lock_info>& locks, const std::vector<sqllock::queue_info>& queue) {
  return locks_table(status_rows(locks), queue);
}

std::string locks_table(const std::vector<status_row>& locks, const std::vector<sqllock::queue_info>& queue) {
  if (!queue.empty()) return locks_table(locks) + "\n" + queue_table(queue);
  // MODE (column 1) only when a reader-writer lease or a semaphore is listed.
  const bool with_mode = std::any_of(locks.begin(), locks.end(), [](const status_row& r) { return r.what != status_row::kind::lock; });
  using row = std::array<std::string, 7>;
  std::vector<row> rows;
  rows.push_back({"NAME", "MODE", "HOLDER", "FENCE", "ACQUIRED (UTC)", "EXPIRES (UTC)", "TIME LEFT"});
  const auto time_or_dash = [](std::chrono::system_clock::time_point t) {
    const std::string text = utc_time(t, false);
    return text.empty() ? std::string("-") : text;
  };
  for (const auto& r : locks) {
    const auto& l = r.lock;
    rows.push_back({printable(l.name), mode_text(r), printable(l.holder), std::to_string(l.fencing_token),
                    time_or_dash(l.acquired_at), time_or_dash(l.expires_at), human_duration(l.time_left)});
  }
  return aligned_table(rows, 3, with_mode ? row{}.size() : 1);  // FENCE right-aligned; MODE only when used
}

}  // namespace sqllock_cli
