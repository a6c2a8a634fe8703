// libFuzzer target: parse_url; typed rejections, re-parse stability, and no password in redacted().
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_common.hpp"
#include "sqllock/parse.hpp"

using namespace sqllock_fuzz;

namespace {

std::size_t count_of(std::string_view hay, std::string_view needle) {
  std::size_t n = 0;
  for (auto p = hay.find(needle); p != std::string_view::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

// Where a password would sit: after the first ':' of the authority, up to its last '@'.
// Returns false when the URL has no such part. The authority follows the scheme's "://", which
// must be the URL's first ':' (a "sqlite:PATH?..." URL has none: a "://...@" further on is text
// of its path or query, which a rejection may name, as the fuzzer found with a parameter key).
bool raw_password_span(std::string_view url, std::size_t& begin, std::size_t& end) {
  auto scheme = url.find("://");
  if (scheme == std::string_view::npos || url.find(':') != scheme) return false;
  auto auth = scheme + 3;
  auto auth_end = url.find_first_of("/?", auth);
  if (auth_end == std::string_view::npos) auth_end = url.size();
  auto at = url.substr(0, auth_end).rfind('@');
  if (at == std::string_view::npos || at < auth) return false;
  auto colon = url.find(':', auth);
  if (colon == std::string_view::npos || colon > at) return false;
  begin = colon + 1;
  end = at;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  sqllock::database_url u;
  std::string message;
  bool ok = accepted([&] { u = sqllock::parse_url(input); }, input, &message);

  std::size_t pb = 0, pe = 0;
  bool has_span = raw_password_span(input, pb, pe);
  if (!ok) {
    // The message never repeats a password that appears nowhere else in the URL.
    if (has_span && pe - pb >= 4) {
      std::string_view raw = input.substr(pb, pe - pb);
      if (count_of(input, raw) == 1 && message.find(raw) != std::string::npos) {
        // Fixed message text may happen to contain it ("... or sqlite:", ": bad character in"): the
        // same URL with the password masked must then give a message that contains it too. Two
        // masks: all 'Q', and each letter or digit replaced by the next of its kind with the rest
        // kept (a password of spaces and ':' masked as Q's can take another path through the
        // parser, and another message, as the fuzzer found with ": bad character in"). A message
        // that repeats the password repeats either mask instead: both then lack it.
        const auto message_of = [&](const std::string& url) {
          std::string m;
          accepted([&] { sqllock::parse_url(url); }, input, &m);
          return m;
        };
        std::string all_q(input);
        all_q.replace(pb, pe - pb, std::string(pe - pb, 'Q'));
        std::string shifted(input);
        for (std::size_t i = pb; i < pe; ++i) {
          char& c = shifted[i];
          if (c >= 'a' && c <= 'z') c = c == 'z' ? 'a' : static_cast<char>(c + 1);
          else if (c >= 'A' && c <= 'Z') c = c == 'Z' ? 'A' : static_cast<char>(c + 1);
          else if (c >= '0' && c <= '9') c = c == '9' ? '0' : static_cast<char>(c + 1);
        }
        // A password without a letter or digit has no second mask: the 'Q' mask alone decides.
        const bool fixed_text = message_of(all_q).find(raw) != std::string::npos ||
                                (shifted != input && message_of(shifted).find(raw) != std::string::npos);
        expect(fixed_text, "the rejection message contains the password", input);
      }
    }
    return 0;
  }

  expect(u.original == input, "original is not the input", input);
  expect(u.port >= 0 && u.port <= 65535, "port out of range", input);
  using kind = sqllock::database_url::kind;
  if (u.scheme == kind::sqlite) {
    expect(input.starts_with("sqlite:"), "sqlite scheme without sqlite: prefix", input);
    expect(!u.path.empty(), "sqlite URL accepted without a path", input);
    expect(u.redacted() == input, "sqlite redacted() changed the URL", input);
  } else {
    bool pg = input.starts_with("postgresql://") || input.starts_with("postgres://");
    expect(u.scheme == (pg ? kind::postgresql : kind::mysql), "scheme does not match the prefix", input);
    if (u.scheme == kind::mysql) expect(!u.host.empty() && !u.database.empty(), "mysql URL without host or db", input);
    expect(u.database.find('/') == std::string::npos, "database name with '/'", input);
    std::string red = u.redacted();
    // redacted() is the URL rebuilt with every secret as ***: it parses back to the same parts.
    sqllock::database_url r = sqllock::parse_url(red);
    expect(r.user == u.user && r.host == u.host && r.port == u.port && r.database == u.database,
           "redacted() does not parse back to the same user, host, port and database", input);
    expect(r.password == (u.password.empty() ? "" : "***"), "redacted() shows a password", input);
    expect(r.params.size() == u.params.size(), "redacted() lost a parameter", input);
    // Every parameter reads back as it was, or as *** (a secret): with the parts above, nothing
    // of redacted() is left where a password could hide. (A substring search for the password
    // cannot tell a leak from the URL's own text: "//sec" in "postgresql://secr...", "3306/sql"
    // in ":3306/sqlx"; the fuzzer found both.)
    for (const auto& [k, v] : u.params) {
      auto it = r.params.find(k);
      expect(it != r.params.end() && (it->second == v || it->second == "***"), "redacted() changed a parameter",
             input);
    }
  }
  // Parsing is stable: the same text parses to the same fields.
  sqllock::database_url again = sqllock::parse_url(input);
  expect(again.user == u.user && again.password == u.password && again.host == u.host && again.port == u.port &&
             again.database == u.database && again.path == u.path && again.params == u.params,
         "parsing the same URL twice differs", input);
  return 0;
}
