// The fixture of the `cli` end-to-end suite (cli_*_test.cpp, one file per topic): a migrated
// SQLite database (sqlite_fixture.hpp), `status --json` parsed, and small process helpers.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <cerrno>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "process_runner.hpp"
#include "sqlite_fixture.hpp"

namespace cli_test {


// ---------------------------------------------------------------------------------------------
// A small JSON reader, enough for `status --json` (arrays, objects, strings, integers).
struct json_value {
  enum class kind { null, boolean, number, string, array, object } type = kind::null;
  long long number = 0;
  std::string text;
  std::vector<json_value> items;
  std::vector<std::pair<std::string, json_value>> members;

  const json_value& at(const std::string& key) const {
    for (const auto& [k, v] : members) {
      if (k == key) return v;
    }
    throw std::runtime_error("missing key " + key);
  }
};

class json_reader {
 public:
  explicit json_reader(std::string_view s) : s_(s) {}
  json_value parse_document() {
    json_value v = value();
    skip_space();
    if (i_ != s_.size()) fail("trailing characters");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) {
    throw std::runtime_error("bad JSON at " + std::to_string(i_) + ": " + what);
  }
  void skip_space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r')) ++i_;
  }
  bool consume(char c) {
    skip_space();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!consume(c)) fail(std::string("expected ") + c);
  }
  json_value value() {
    skip_space();
    if (i_ >= s_.size()) fail("unexpected end");
    json_value v;
    const char c = s_[i_];
    if (c == '[') {
      ++i_;
      v.type = json_value::kind::array;
      if (consume(']')) return v;
      do v.items.push_back(value());
      while (consume(','));
      expect(']');
    } else if (c == '{') {
      ++i_;
      v.type = json_value::kind::object;
      if (consume('}')) return v;
      do {
        skip_space();
        std::string key = string();
        expect(':');
        v.members.emplace_back(std::move(key), value());
      } while (consume(','));
      expect('}');
    } else if (c == '"') {
      v.type = json_value::kind::string;
      v.text = string();
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      v.type = json_value::kind::number;
      std::size_t used = 0;
      v.number = std::stoll(std::string(s_.substr(i_, 24)), &used);
      i_ += used;
    } else if (s_.substr(i_, 4) == "true" || s_.substr(i_, 4) == "null") {
      v.type = s_[i_] == 't' ? json_value::kind::boolean : json_value::kind::null;
      i_ += 4;
    } else if (s_.substr(i_, 5) == "false") {
      v.type = json_value::kind::boolean;
      i_ += 5;
    } else {
      fail("unexpected character");
    }
    return v;
  }
  unsigned hex4() {
    if (i_ + 4 > s_.size()) fail("short \\u escape");
    const unsigned v = static_cast<unsigned>(std::stoul(std::string(s_.substr(i_, 4)), nullptr, 16));
    i_ += 4;
    return v;
  }
  static void append_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  std::string string() {
    if (i_ >= s_.size() || s_[i_] != '"') fail("expected string");
    ++i_;
    std::string out;
    for (;;) {
      if (i_ >= s_.size()) fail("unterminated string");
      const auto c = static_cast<unsigned char>(s_[i_++]);
      if (c == '"') return out;
      if (c < 0x20) fail("raw control character in string");
      if (c != '\\') {
        out += static_cast<char>(c);
        continue;
      }
      if (i_ >= s_.size()) fail("dangling backslash");
      const char e = s_[i_++];
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          unsigned cp = hex4();
          if (cp >= 0xD800 && cp < 0xDC00) {
            if (s_.substr(i_, 2) != "\\u") fail("lone high surrogate");
            i_ += 2;
            const unsigned low = hex4();
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          }
          append_utf8(out, cp);
          break;
        }
        default:
          fail("bad escape");
      }
    }
  }
  std::string_view s_;
  std::size_t i_ = 0;
};

inline json_value parse_json(const std::string& text) { return json_reader(text).parse_document(); }

/// True when `pid` no longer runs (gone, or a zombie waiting for whoever reaps orphans).
inline bool process_gone(pid_t pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
  const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  const auto paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z';
}

inline process_options with_env(std::map<std::string, std::string> env) {
  process_options options;
  options.env = std::move(env);
  return options;
}

inline process_options in_dir(const std::string& dir) {
  process_options options;
  options.cwd = dir;
  return options;
}

// ---------------------------------------------------------------------------------------------
// Fixture: a fresh temporary directory with a migrated SQLite lock database.

class cli : public sqlite_fixture {
 protected:
  json_value status_json() {
    const auto r = sqllock({"status", "--url", url_, "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return parse_json(r.out);
  }
};

class cli_unmigrated : public cli {
 protected:
  bool migrate_in_setup() const override { return false; }
};

}  // namespace cli_test
