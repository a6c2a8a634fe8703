// Text and JSON rendering for `sqllock status`: escaping of arbitrary names and human durations.
#include "output_format.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>

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

/// Display columns of `text` (one per code point; good enough for alignment).
std::size_t display_width(std::string_view text) {
  std::size_t width = 0;
  for (unsigned char c : text) {
    if ((c & 0xC0) != 0x80) ++width;
  }
  return width;
}

}  // namespace

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

std::string locks_json(const std::vector<sqllock::lock_info>& locks) {
  if (locks.empty()) return "[]\n";
  std::string out = "[\n";
  for (std::size_t i = 0; i < locks.size(); ++i) {
    const auto& l = locks[i];
    out += "  {\"name\": " + json_string(l.name) + ", \"holder\": " + json_string(l.holder) +
           ", \"fencing_token\": " + std::to_string(l.fencing_token) +
           ", \"hold_count\": " + std::to_string(l.hold_count) +
           ", \"time_left_ms\": " + std::to_string(l.time_left.count()) + "}";
    out += i + 1 < locks.size() ? ",\n" : "\n";
  }
  out += "]\n";
  return out;
}

std::string locks_table(const std::vector<sqllock::lock_info>& locks) {
  using row = std::array<std::string, 4>;
  std::vector<row> rows;
  rows.push_back({"NAME", "HOLDER", "FENCE", "TIME LEFT"});
  for (const auto& l : locks) {
    rows.push_back(
        {printable(l.name), printable(l.holder), std::to_string(l.fencing_token), human_duration(l.time_left)});
  }
  std::array<std::size_t, 4> widths{};
  for (const auto& r : rows) {
    for (std::size_t c = 0; c < r.size(); ++c) widths[c] = std::max(widths[c], display_width(r[c]));
  }
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (std::size_t c = 0; c < r.size(); ++c) {
      const bool last = c + 1 == r.size();
      // The fencing token is right-aligned like every number; text columns are left-aligned.
      const std::string pad(widths[c] - display_width(r[c]), ' ');
      line += c == 2 ? pad + r[c] : r[c] + (last ? "" : pad);
      if (!last) line += "  ";
    }
    out += line + "\n";
  }
  return out;
}

}  // namespace sqllock_cli
