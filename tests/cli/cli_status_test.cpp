// End-to-end tests of the `sqllock` command on SQLite (suite `cli`, split by topic over
// cli_*_test.cpp, issue 12; fixture in cli_fixture.hpp): `status` (table and JSON, times, alignment of wide characters) and `release --force`.
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <ctime>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "process_runner.hpp"
#include "cli_fixture.hpp"
#include "sqlite_fixture.hpp"
#include "terminal_session.hpp"

using namespace std::chrono_literals;
using namespace cli_test;

namespace {

/// Display columns of UTF-8 `text` for the test's own strings: ASCII 1, CJK (U+2E80..U+9FFF,
/// U+AC00..U+D7A3, U+FF01..U+FF60) 2, combining marks (U+0300..U+036F) 0, anything else 1.
std::size_t test_width(std::string_view text) {
  std::size_t width = 0;
  for (std::size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    std::size_t len = b < 0x80 ? 1 : (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : 4;
    unsigned cp = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
    for (std::size_t k = 1; k < len && i + k < text.size(); ++k) cp = (cp << 6) | (text[i + k] & 0x3F);
    if (cp >= 0x300 && cp <= 0x36F) {
    } else if ((cp >= 0x2E80 && cp <= 0x9FFF) || (cp >= 0xAC00 && cp <= 0xD7A3) || (cp >= 0xFF01 && cp <= 0xFF60)) {
      width += 2;
    } else {
      width += 1;
    }
    i += len;
  }
  return width;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}


// ---------------------------------------------------------------------------------------------
// status and release.

TEST_F(cli, status_empty_prints_header_or_empty_array) {
  auto r = sqllock({"status", "--url", url_});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("NAME"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("HOLDER"), std::string::npos) << r.out;
  r = sqllock({"status", "--url", url_, "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[]\n");
}

TEST_F(cli, status_json_escapes_names_and_release_force_empties_it) {
  const std::string name = "we\"ird\\name\n\t\x01 d\xc3\xa9j\xc3\xa0 \xe2\x88\x86";
  auto p = start(run_args(name, {"--holder", "json \"holder\"", "--ttl", "2s", "--grace", "200ms"},
                          "echo x > " + path("held") + "; exec sleep 30"));
  ASSERT_TRUE(wait_for_file(path("held")));

  const auto locks = status_json();
  ASSERT_EQ(locks.type, json_value::kind::array);
  ASSERT_EQ(locks.items.size(), 1u);
  const auto& lock = locks.items[0];
  EXPECT_EQ(lock.at("name").text, name);
  EXPECT_EQ(lock.at("holder").text, "json \"holder\"");
  EXPECT_GE(lock.at("fencing_token").number, 1);
  EXPECT_EQ(lock.at("hold_count").number, 1);
  EXPECT_GT(lock.at("time_left_ms").number, 0);
  EXPECT_LE(lock.at("time_left_ms").number, 2000);

  // The table shows the escaped name and the holder.
  const auto table = sqllock({"status", "--url", url_});
  EXPECT_EQ(table.exit_code, 0);
  EXPECT_NE(table.out.find("we\"ird\\\\name\\x0A"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("json \"holder\""), std::string::npos) << table.out;

  const auto released = sqllock({"release", "--url", url_, "--name", name, "--force"});
  EXPECT_EQ(released.exit_code, 0) << released.err;
  EXPECT_EQ(status_json().items.size(), 0u);
  EXPECT_EQ(p->wait(6s).exit_code, 76);

  const auto again = sqllock({"release", "--url", url_, "--name", name, "--force"});
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("not held"), std::string::npos) << again.out;
}

// Acquired-at and expires-at (database clock) in the table and the JSON; wide characters
// keep the columns lined up.
TEST_F(cli, status_shows_acquired_and_expires_and_aligns_wide_characters) {
  const std::string wide = "\xe9\x8c\xa0\xe5\x89\x8d\xe3\x83\xad\xe3\x83\x83\xe3\x82\xaf";  // 錠前ロック: 10 columns
  const std::string combining = "cafe\xcc\x81-job";                                        // café-job: 8 columns
  auto a = start(run_args(wide, {"--holder", "h-wide", "--ttl", "20s"}, "echo x > " + path("a") + "; exec sleep 30"));
  auto b = start(run_args("ascii-name", {"--holder", "h-ascii", "--ttl", "20s"}, "echo x > " + path("b") + "; exec sleep 30"));
  auto c = start(run_args(combining, {"--holder", "h-comb", "--ttl", "20s"}, "echo x > " + path("c") + "; exec sleep 30"));
  ASSERT_TRUE(wait_for_file(path("a")));
  ASSERT_TRUE(wait_for_file(path("b")));
  ASSERT_TRUE(wait_for_file(path("c")));

  const auto locks = status_json();
  ASSERT_EQ(locks.items.size(), 3u);
  for (const auto& lock : locks.items) {
    const std::string acquired = lock.at("acquired_at").text;
    const std::string expires = lock.at("expires_at").text;
    // RFC 3339 UTC with milliseconds: 2026-11-25T12:34:56.789Z
    EXPECT_EQ(acquired.size(), 24u) << acquired;
    EXPECT_EQ(acquired.back(), 'Z') << acquired;
    EXPECT_EQ(acquired[10], 'T') << acquired;
    EXPECT_LT(acquired, expires);
    EXPECT_FALSE(lock.at("owner").text.empty());
    // The acquisition was within the last minute by this machine's clock (SQLite: the same clock).
    std::tm tm{};
    ASSERT_NE(::strptime(acquired.c_str(), "%Y-%m-%dT%H:%M:%S", &tm), nullptr) << acquired;
    const auto t = ::timegm(&tm);
    EXPECT_LE(std::abs(static_cast<long long>(::time(nullptr) - t)), 60) << acquired;
  }

  const auto r = sqllock({"status", "--url", url_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 4u) << r.out;
  EXPECT_NE(lines[0].find("ACQUIRED"), std::string::npos) << r.out;
  EXPECT_NE(lines[0].find("EXPIRES"), std::string::npos) << r.out;
  // Every column starts at the same display column on every line.
  const auto column_of = [](const std::string& line, const std::string& text) {
    const auto at = line.find(text);
    return at == std::string::npos ? std::string::npos : test_width(std::string_view(line).substr(0, at));
  };
  const std::size_t holder_col = column_of(lines[0], "HOLDER");
  const std::size_t fence_end = column_of(lines[0], "FENCE") + 5;
  const std::size_t acquired_col = column_of(lines[0], "ACQUIRED");
  const std::size_t left_col = column_of(lines[0], "TIME LEFT");
  ASSERT_NE(holder_col, std::string::npos);
  ASSERT_NE(acquired_col, std::string::npos);
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    const auto width_to = [&](std::size_t byte) { return test_width(std::string_view(line).substr(0, byte)); };
    const auto holder_at = line.find(" h-") + 1;
    EXPECT_EQ(width_to(holder_at), holder_col) << r.out;
    // The right-aligned fence ends under the end of FENCE; ACQUIRED and TIME LEFT start under theirs.
    const auto fence_at = line.find_first_not_of(' ', line.find(' ', holder_at));
    const auto fence_stop = line.find(' ', fence_at);
    EXPECT_EQ(width_to(fence_stop), fence_end) << r.out;
    EXPECT_EQ(width_to(line.find_first_not_of(' ', fence_stop)), acquired_col) << r.out;
    EXPECT_EQ(width_to(line.find_last_of(' ') + 1), left_col) << r.out;
  }
  for (auto* p : {a.get(), b.get(), c.get()}) ::kill(p->pid(), SIGTERM);
}

}  // namespace
