// Validation of everything a user types: URLs, durations, lock names, TTLs, identifiers.
#include "sqllock/parse.hpp"

#include <charconv>
#include <limits>
#include <string>

#include "sqllock/error.hpp"
#include "sqllock/value.hpp"

namespace sqllock {
namespace {

bool is_ident_start(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
bool is_ident_char(char c) { return is_ident_start(c) || (c >= '0' && c <= '9'); }

// Printable form of user text for error messages: control and non-ASCII bytes escaped, truncated.
std::string printable(std::string_view s, std::size_t max = 64) {
  static const char hex[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < s.size() && i < max; ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  if (s.size() > max) out += "...";
  return out;
}

bool valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    std::size_t len;
    std::uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    for (std::size_t k = 1; k < len; ++k) {
      auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8.
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000)) return false;
    if (cp >= 0xD800 && cp <= 0xDFFF) return false;
    if (cp > 0x10FFFF) return false;
    i += len;
  }
  return true;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string percent_decode(std::string_view s, const char* what) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%') {
      if (i + 2 >= s.size()) {
        throw invalid_argument(std::string("invalid URL: truncated percent escape in the ") + what);
      }
      int hi = hex_value(s[i + 1]);
      int lo = hex_value(s[i + 2]);
      if (hi < 0 || lo < 0) throw invalid_argument(std::string("invalid URL: bad percent escape in the ") + what);
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

void parse_server_url(std::string_view rest, database_url& u) {
  // rest = [user[:password]@]host[:port][/database][?params]
  std::string_view query;
  if (auto q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  std::string_view authority = rest;
  std::string_view path;
  if (auto slash = rest.find('/'); slash != std::string_view::npos) {
    authority = rest.substr(0, slash);
    path = rest.substr(slash + 1);
  }
  if (auto at = authority.rfind('@'); at != std::string_view::npos) {
    std::string_view userinfo = authority.substr(0, at);
    authority = authority.substr(at + 1);
    if (auto colon = userinfo.find(':'); colon != std::string_view::npos) {
      u.user = percent_decode(userinfo.substr(0, colon), "user name");
      u.password = percent_decode(userinfo.substr(colon + 1), "password");
    } else {
      u.user = percent_decode(userinfo, "user name");
    }
  }
  std::string_view host = authority;
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {  // [IPv6]:port
    auto close = authority.find(']');
    if (close == std::string_view::npos) throw invalid_argument("invalid URL: unterminated [IPv6] host");
    host = authority.substr(1, close - 1);
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') throw invalid_argument("invalid URL: junk after the [IPv6] host");
      port = after.substr(1);
    }
  } else if (auto colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
    if (port.empty()) throw invalid_argument("invalid URL: empty port");
  }
  for (char c : host) {
    if (c == '/' || c == '@' || c == ' ' || static_cast<unsigned char>(c) < 0x20) {
      throw invalid_argument("invalid URL: bad character in host name");
    }
  }
  u.host = percent_decode(host, "host");
  if (!port.empty()) {
    int p = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
    if (ec != std::errc() || end != port.data() + port.size() || p < 1 || p > 65535) {
      throw invalid_argument("invalid URL: port must be a number from 1 to 65535, not '" + printable(port) + "'");
    }
    u.port = p;
  }
  u.database = percent_decode(path, "database name");
  if (u.database.find('/') != std::string::npos) throw invalid_argument("invalid URL: database name contains '/'");
  while (!query.empty()) {
    auto amp = query.find('&');
    std::string_view kv = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (kv.empty()) continue;
    auto eq = kv.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      throw invalid_argument("invalid URL: query parameter '" + printable(kv) + "' is not key=value");
    }
    u.params[percent_decode(kv.substr(0, eq), "parameters")] = percent_decode(kv.substr(eq + 1), "parameters");
  }
}

}  // namespace

std::string database_url::redacted() const {
  if (scheme == kind::sqlite) return original;
  if (password.empty()) return original;
  // Replace whatever stands between "user:" and the last '@' of the authority by ***.
  std::string out = original;
  auto scheme_end = out.find("://");
  if (scheme_end == std::string::npos) return "<url>";
  auto auth_start = scheme_end + 3;
  auto auth_end = out.find_first_of("/?", auth_start);
  if (auth_end == std::string::npos) auth_end = out.size();
  auto at = out.rfind('@', auth_end);
  if (at == std::string::npos || at < auth_start) return out;
  auto colon = out.find(':', auth_start);
  if (colon == std::string::npos || colon > at) return out;
  out.replace(colon + 1, at - colon - 1, "***");
  return out;
}

database_url parse_url(std::string_view url) {
  database_url u;
  u.original = std::string(url);
  if (url.empty()) throw invalid_argument("invalid URL: empty");
  for (char c : url) {
    if (c == '\0' || c == '\n' || c == '\r') throw invalid_argument("invalid URL: contains a control character");
  }
  if (url.starts_with("sqlite:")) {
    u.scheme = database_url::kind::sqlite;
    std::string_view rest = url.substr(7);
    if (rest == ":memory:") {
      u.path = ":memory:";
    } else if (rest.starts_with("///")) {
      u.path = std::string(rest.substr(2));  // sqlite:///abs/path.db -> /abs/path.db
    } else if (rest.starts_with("//")) {
      throw invalid_argument("invalid URL: sqlite URLs take no host; write sqlite:PATH or sqlite:///abs/path.db");
    } else {
      u.path = std::string(rest);
    }
    if (u.path.empty() || u.path == "/") throw invalid_argument("invalid URL: sqlite URL without a file path");
    return u;
  }
  std::string_view rest;
  if (url.starts_with("postgresql://")) {
    u.scheme = database_url::kind::postgresql;
    rest = url.substr(13);
  } else if (url.starts_with("postgres://")) {
    u.scheme = database_url::kind::postgresql;
    rest = url.substr(11);
  } else if (url.starts_with("mysql://")) {
    u.scheme = database_url::kind::mysql;
    rest = url.substr(8);
  } else {
    auto colon = url.find(':');
    std::string scheme = colon == std::string_view::npos ? std::string("(none)") : printable(url.substr(0, colon), 20);
    throw invalid_argument("invalid URL: unknown scheme '" + scheme +
                           "' (expected postgresql://, postgres://, mysql:// or sqlite:)");
  }
  parse_server_url(rest, u);
  if (u.scheme == database_url::kind::mysql) {
    if (u.host.empty()) throw invalid_argument("invalid URL: mysql:// needs a host");
    if (u.database.empty())
      throw invalid_argument("invalid URL: mysql:// needs a database (mysql://user:pass@host:port/db)");
  }
  return u;
}

std::chrono::milliseconds parse_duration(std::string_view text) {
  auto bad = [&](const char* why) {
    return invalid_argument("invalid duration '" + printable(text) + "': " + why + " (write e.g. 500ms, 30s, 5m, 1h)");
  };
  std::size_t i = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
  if (i == 0) throw bad("must start with a whole number");
  std::int64_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + i, n);
  if (ec != std::errc() || end != text.data() + i) throw bad("number out of range");
  std::string_view unit = text.substr(i);
  std::int64_t factor;
  if (unit == "ms") {
    factor = 1;
  } else if (unit == "s") {
    factor = 1000;
  } else if (unit == "m") {
    factor = 60'000;
  } else if (unit == "h") {
    factor = 3'600'000;
  } else if (unit.empty()) {
    throw bad("missing unit");
  } else {
    throw bad("unknown unit");
  }
  // Ten years is far beyond any sensible lease or wait, and keeps all arithmetic in range.
  constexpr std::int64_t max_ms = 10LL * 366 * 24 * 3'600'000;
  if (n > max_ms / factor) throw bad("too long (at most 10 years)");
  return std::chrono::milliseconds(n * factor);
}

void validate_lock_name(std::string_view name) {
  if (name.empty()) throw invalid_argument("invalid lock name: empty (1 to 255 bytes of UTF-8)");
  if (name.size() > 255) {
    throw invalid_argument("invalid lock name: " + std::to_string(name.size()) + " bytes (at most 255)");
  }
  if (name.find('\0') != std::string_view::npos) throw invalid_argument("invalid lock name: contains a NUL byte");
  if (!valid_utf8(name)) throw invalid_argument("invalid lock name: not valid UTF-8: '" + printable(name) + "'");
}

void validate_ttl(std::chrono::milliseconds ttl) {
  if (ttl.count() <= 0) {
    throw invalid_argument("invalid TTL: " + std::to_string(ttl.count()) + " ms (must be at least 1 ms)");
  }
  constexpr std::int64_t max_ms = 10LL * 366 * 24 * 3'600'000;
  if (ttl.count() > max_ms) throw invalid_argument("invalid TTL: longer than 10 years");
}

void validate_identifier(std::string_view id) {
  auto check_part = [&](std::string_view part) {
    if (part.empty() || part.size() > 63 || !is_ident_start(part.front())) return false;
    for (char c : part) {
      if (!is_ident_char(c)) return false;
    }
    return true;
  };
  auto dot = id.find('.');
  bool ok =
      dot == std::string_view::npos ? check_part(id) : check_part(id.substr(0, dot)) && check_part(id.substr(dot + 1));
  if (!ok) {
    throw invalid_argument("invalid identifier '" + printable(id) +
                           "': use letters, digits and _ (not first), at most 63 bytes, optionally schema.name");
  }
}

std::string quote_identifier(std::string_view id, dialect d) {
  validate_identifier(id);
  const char q = d == dialect::mysql ? '`' : '"';
  std::string out;
  out += q;
  for (char c : id) {
    if (c == '.') {
      out += q;
      out += '.';
      out += q;
    } else {
      out += c;
    }
  }
  out += q;
  return out;
}

std::int64_t result_row::as_int(std::size_t i) const {
  const auto& c = columns.at(i);
  if (!c) throw invalid_argument("column " + std::to_string(i) + " is NULL");
  std::int64_t v = 0;
  const char* b = c->data();
  const char* e = b + c->size();
  auto [end, ec] = std::from_chars(b, e, v);
  if (ec != std::errc() || end != e) {
    // Accept a floating representation of an integer ("12.0") that some drivers produce.
    double d = 0;
    auto [end2, ec2] = std::from_chars(b, e, d);
    if (ec2 != std::errc() || end2 != e || d != static_cast<double>(static_cast<std::int64_t>(d))) {
      throw invalid_argument("column " + std::to_string(i) + " is not an integer");
    }
    return static_cast<std::int64_t>(d);
  }
  return v;
}

const std::string& result_row::as_text(std::size_t i) const {
  const auto& c = columns.at(i);
  if (!c) throw invalid_argument("column " + std::to_string(i) + " is NULL");
  return *c;
}

}  // namespace sqllock
