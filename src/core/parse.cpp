// Validation of everything a user types: URLs, durations, lock names, TTLs, identifiers.
#include "sqllock/parse.hpp"

#include <algorithm>
#include <charconv>
#include <limits>
#include <string>
#include <vector>

#include "core/permit_name.hpp"
#include "core/url.hpp"
#include "sqllock/error.hpp"
#include "sqllock/value.hpp"

namespace sqllock {
namespace {

bool is_ident_start(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
bool is_ident_char(char c) { return is_ident_start(c) || (c >= '0' && c <= '9'); }

// User text with the password of any URL inside it masked: for every "://", the part between the
// first ':' after it and the last '@' of the text becomes "***" (a parameter name can hold a whole
// URL pasted by mistake, e.g. "sqlite:db?x postgresql://app:secret@host/app"). Not only up to the
// authority's end at '/', '?' or '#': the parser reads passwords holding those ("hun/ter2"), so
// masking may take more than the password, never less.
std::string without_embedded_passwords(std::string_view s) {
  std::string out(s);
  for (auto scheme = out.find("://"); scheme != std::string::npos; scheme = out.find("://", scheme + 3)) {
    const auto auth = scheme + 3;
    if (auth >= out.size()) break;
    const auto at = out.rfind('@');
    if (at == std::string::npos || at < auth) continue;
    const auto colon = out.find(':', auth);
    if (colon == std::string::npos || colon > at) continue;
    out.replace(colon + 1, at - colon - 1, "***");
  }
  return out;
}

// Printable form of user text for error messages: any embedded URL's password masked, control and
// non-ASCII bytes escaped, truncated.
std::string printable(std::string_view raw, std::size_t max = 64) {
  static const char hex[] = "0123456789abcdef";
  const std::string masked = without_embedded_passwords(raw);
  const std::string_view s = masked;
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

bool is_authority_char(char c) {
  return is_ident_char(c) || c == '.' || c == '-' || c == '~' || c == '%' || c == ':' || c == ',' || c == '[' ||
         c == ']';
}

// Where the user-info of `rest` ends (the '@' before the host), or npos when there is none.
//
// RFC 3986 forbids '/', '?' and '@' in a user-info, but generated passwords contain them, and a
// misread password would land in the host, port or path and be shown. So the user-info ends at the
// LAST '@' that is followed by something shaped like host[:port] (then '/', '?' or the end) and
// preceded by a user name without '/', '?', '&' or '=' (which would make the '@' part of a path or
// query); a password may then hold any character. Two exceptions keep ordinary URLs working: an
// '@' inside a query value after an earlier such '@' ("u:p@h/db?application_name=a@b"), and
// "host:PORT/...?k=v@x" without user-info. Anything else with '@' in a path or query: write %40.
std::size_t userinfo_end(std::string_view rest) {
  auto valid = [&](std::size_t at) {
    std::string_view after = rest.substr(at + 1);
    after = after.substr(0, after.find_first_of("/?"));
    for (char c : after) {
      if (!is_authority_char(c)) return false;
    }
    std::string_view user = rest.substr(0, std::min(at, rest.find(':')));
    return user.find_first_of("/?&=#") == std::string_view::npos;
  };
  // Does `text` (what lies between the end of a user-info and a later '@') read as
  // host[:port][/path]?key=value, putting that '@' in a query value?
  auto in_query_value = [](std::string_view text) {
    auto q = text.find('?');
    if (q == std::string_view::npos || text.find('=', q) == std::string_view::npos) return false;
    std::string_view host = text.substr(0, text.find_first_of("/?"));
    for (char c : host) {
      if (!is_authority_char(c)) return false;
    }
    if (auto colon = host.rfind(':'); colon != std::string_view::npos && host.find(']', colon) == std::string_view::npos) {
      std::string_view port = host.substr(colon + 1);
      if (port.empty()) return false;
      for (char c : port) {
        if (c < '0' || c > '9') return false;
      }
    }
    return true;
  };
  // After the later '@' a path or query ("...?k=v@realhost/db") reads just as well as the end of a
  // user-info holding '/', '?' and '@': either reading may show a password, so neither is taken.
  auto refuse_if_ambiguous = [&](std::size_t later_at) {
    if (rest.find_first_of("/?", later_at + 1) != std::string_view::npos) {
      throw invalid_argument(
          "invalid URL: an '@' could end the user-info or belong to a query value; write an '@' of a "
          "password or a value as %40");
    }
  };
  std::size_t chosen = std::string_view::npos;
  for (std::size_t at = rest.find('@'); at != std::string_view::npos; at = rest.find('@', at + 1)) {
    if (!valid(at)) continue;
    if (chosen != std::string_view::npos && in_query_value(rest.substr(chosen + 1, at - chosen - 1))) {
      refuse_if_ambiguous(at);
      break;
    }
    chosen = at;
  }
  if (chosen == std::string_view::npos) return chosen;
  // "host:5432/db?k=v@x": a port, a path and a query value, not a password.
  std::string_view info = rest.substr(0, chosen);
  if (auto colon = info.find(':'); colon != std::string_view::npos) {
    std::string_view pw = info.substr(colon + 1);
    std::size_t digits = 0;
    while (digits < pw.size() && pw[digits] >= '0' && pw[digits] <= '9') ++digits;
    if (digits >= 1 && digits <= 5 && digits < pw.size() && pw[digits] == '/' && in_query_value(pw)) {
      refuse_if_ambiguous(chosen);
      return std::string_view::npos;
    }
  }
  return chosen;
}

void parse_server_url(std::string_view rest, database_url& u) {
  // rest = [user[:password]@]host[:port][/database][?params]
  if (auto at = userinfo_end(rest); at != std::string_view::npos) {
    std::string_view userinfo = rest.substr(0, at);
    rest = rest.substr(at + 1);
    if (auto colon = userinfo.find(':'); colon != std::string_view::npos) {
      u.user = percent_decode(userinfo.substr(0, colon), "user name");
      u.password = percent_decode(userinfo.substr(colon + 1), "password");
    } else {
      u.user = percent_decode(userinfo, "user name");
    }
  }
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
  const bool bracketed = !authority.empty() && authority.front() == '[';
  u.host = percent_decode(host, "host");
  // Checked after decoding: an escaped '@' or ':' in a host would read back as user-info or port.
  // A host starting with '/' is libpq's unix-socket directory (written %2Fvar%2Frun%2Fpostgresql).
  for (char c : u.host) {
    if ((c == '/' && u.host.front() != '/') || c == '@' || c == ' ' || c == '?' || c == '#' || static_cast<unsigned char>(c) < 0x20 ||
        (c == ':' && !bracketed && u.host.find(',') == std::string::npos) || (c == ',' && bracketed)) {  // h1:5432,h2 is libpq's host list
      throw invalid_argument("invalid URL: bad character in host name");
    }
  }
  if (!port.empty()) {
    // The text is not repeated: in a malformed URL it may be part of a password.
    int p = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
    if (ec != std::errc() || end != port.data() + port.size() || p < 1 || p > 65535) {
      throw invalid_argument("invalid URL: the port must be a number from 1 to 65535");
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
      // Not repeated either: it may be the tail of a password.
      throw invalid_argument("invalid URL: a query parameter is not written key=value");
    }
    u.params[percent_decode(kv.substr(0, eq), "parameters")] = percent_decode(kv.substr(eq + 1), "parameters");
  }
}

// Whether the text after a '?' in a sqlite: URL is a query: key=value pairs joined by '&', each
// key made of letters, digits and '_' (so "odd?name.db" stays a file name), or anything starting
// with one of the keys sqlite: URLs take (then a malformed part is an error, not a file name).
bool looks_like_query(std::string_view text) {
  if (text.starts_with("sqllock_") || text.starts_with("mode=")) return true;
  if (text.empty()) return false;
  while (true) {
    const auto amp = text.find('&');
    const std::string_view kv = text.substr(0, amp);
    const auto eq = kv.find('=');
    if (eq == std::string_view::npos || eq == 0) return false;
    for (char c : kv.substr(0, eq)) {
      if (!is_ident_char(c)) return false;
    }
    if (amp == std::string_view::npos) return true;
    text = text.substr(amp + 1);
  }
}

// Percent-encode every byte of `s` except unreserved ones and those in `keep`.
std::string percent_encode(std::string_view s, std::string_view keep = {}) {
  static const char hex[] = "0123456789ABCDEF";
  std::string out;
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (is_ident_char(ch) || ch == '-' || ch == '.' || ch == '~' || keep.find(ch) != std::string_view::npos) {
      out += ch;
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

// The URL from its parts; `secrets_shown` false puts *** in place of every credential.
std::string rebuild(const database_url& u, bool secrets_shown) {
  // The scheme as written (postgres:// and mariadb:// are spellings of postgresql:// and mysql://).
  const std::string_view original = u.original;
  std::string out = original.starts_with("postgres://")  ? "postgres://"
                    : original.starts_with("mariadb://") ? "mariadb://"
                    : u.scheme == database_url::kind::mysql ? "mysql://"
                                                            : "postgresql://";
  // Readable where it cannot be misread: printable ASCII other than the URL's delimiters stays.
  const std::string_view readable = "!$'()*+,;_";
  if (!u.user.empty() || !u.password.empty()) {
    out += percent_encode(u.user, readable);
    if (!u.password.empty()) out += ":" + (secrets_shown ? percent_encode(u.password) : std::string("***"));
    out += '@';
  }
  if (u.host.find(':') != std::string::npos && u.host.find(',') == std::string::npos) {
    out += "[" + percent_encode(u.host, ":") + "]";
  } else {
    out += percent_encode(u.host, ":,");
  }
  if (u.port > 0) out += ":" + std::to_string(u.port);
  if (!u.database.empty()) out += "/" + percent_encode(u.database, readable);
  char sep = '?';
  for (const auto& [key, value] : u.params) {
    out += sep;
    sep = '&';
    out += percent_encode(key, readable) + "=";
    out += !secrets_shown && detail::is_secret_parameter(key) ? std::string("***")
                                                              : percent_encode(value, std::string(readable) + ":/");  // '@' escaped: it would read back as user-info
  }
  return out;
}

}  // namespace

namespace detail {

bool is_secret_parameter(std::string_view key) noexcept {
  std::string k;
  for (char c : key) k += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  for (std::string_view word : {"password", "passwd", "secret", "token"}) {
    if (k.find(word) != std::string::npos) return true;
  }
  return k == "pwd" || k == "pass";
}

std::string driver_uri(const database_url& url) { return rebuild(url, true); }

void scrub_secrets(std::string& text, const database_url& url) {
  std::vector<std::string> secrets;
  auto add = [&](const std::string& secret) {
    if (secret.empty()) return;
    secrets.push_back(secret);
    secrets.push_back(percent_encode(secret));
  };
  add(url.password);
  for (const auto& [key, value] : url.params) {
    if (is_secret_parameter(key)) add(value);
  }
  // Longest first, so a secret containing another is replaced whole.
  std::sort(secrets.begin(), secrets.end(), [](const auto& a, const auto& b) { return a.size() > b.size(); });
  for (const auto& secret : secrets) {
    for (auto pos = text.find(secret); pos != std::string::npos; pos = text.find(secret, pos + 3)) {
      text.replace(pos, secret.size(), "***");
    }
  }
}

}  // namespace detail

std::string database_url::redacted() const {
  if (scheme == kind::sqlite) return original;
  return rebuild(*this, false);
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
    // A '?' followed by key=value parameters starts the query: sqllock's own sqllock_ ones and
    // SQLite's `mode` (ro or rw). Any other '?' is part of the file name.
    if (auto q = rest.find('?'); q != std::string_view::npos && looks_like_query(rest.substr(q + 1))) {
      std::string_view query = rest.substr(q + 1);
      rest = rest.substr(0, q);
      while (!query.empty()) {
        auto amp = query.find('&');
        std::string_view kv = query.substr(0, amp);
        query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
        auto eq = kv.find('=');
        if (eq == std::string_view::npos || eq == 0) {
          throw invalid_argument("invalid URL: sqlite: parameters are written key=value");
        }
        std::string key = percent_decode(kv.substr(0, eq), "parameters");
        std::string value = percent_decode(kv.substr(eq + 1), "parameters");
        if (key == "mode") {
          if (value != "ro" && value != "rw") {
            throw invalid_argument("invalid URL: sqlite: mode=" + printable(value, 20) +
                                   " is not supported (mode=ro opens read-only, mode=rw read-write)");
          }
        } else if (!key.starts_with("sqllock_")) {
          throw invalid_argument("invalid URL: sqlite: unknown parameter '" + printable(key, 40) +
                                 "' (sqlite: URLs take mode=ro|rw and sqllock_ parameters)");
        }
        u.params[key] = value;
      }
    }
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
  } else if (url.starts_with("mariadb://")) {  // the same backend: MariaDB and MySQL speak one protocol
    u.scheme = database_url::kind::mysql;
    rest = url.substr(10);
  } else {
    auto colon = url.find(':');
    std::string scheme = colon == std::string_view::npos ? std::string("(none)") : printable(url.substr(0, colon), 20);
    throw invalid_argument("invalid URL: unknown scheme '" + scheme +
                           "' (expected postgresql://, postgres://, mysql://, mariadb:// or sqlite:)");
  }
  parse_server_url(rest, u);
  if (u.scheme == database_url::kind::mysql) {
    const std::string scheme = url.starts_with("mariadb://") ? "mariadb://" : "mysql://";
    if (u.host.empty()) throw invalid_argument("invalid URL: " + scheme + " needs a host");
    if (u.database.empty())
      throw invalid_argument("invalid URL: " + scheme + " needs a database (" + scheme + "user:pass@host:port/db)");
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

void validate_permits(int permits) {
  if (permits < 1 || permits > detail::max_semaphore_permits) {
    throw invalid_argument("permits must be 1 to " + std::to_string(detail::max_semaphore_permits) + ", not " +
                           std::to_string(permits));
  }
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
