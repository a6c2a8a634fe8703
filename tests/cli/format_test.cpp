// Unit tests of the command's output rendering: JSON escaping, terminal-safe text, durations.
#include <gtest/gtest.h>

#include "output_format.hpp"

using namespace std::chrono_literals;
using sqllock_cli::human_duration;
using sqllock_cli::json_string;
using sqllock_cli::printable;

TEST(format, json_string_escapes_quotes_backslashes_and_controls) {
  EXPECT_EQ(json_string("plain"), "\"plain\"");
  EXPECT_EQ(json_string("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(json_string("\n\r\t\b\f"), "\"\\n\\r\\t\\b\\f\"");
  EXPECT_EQ(json_string(std::string_view("\x01\x1f\x7f", 3)), "\"\\u0001\\u001F\\u007F\"");
  EXPECT_EQ(json_string(std::string_view("a\0b", 3)), "\"a\\u0000b\"");
}

TEST(format, json_string_keeps_utf8_and_replaces_invalid_bytes) {
  EXPECT_EQ(json_string("d\xc3\xa9j\xc3\xa0 \xe2\x88\x86 \xf0\x9f\x94\x92"),
            "\"d\xc3\xa9j\xc3\xa0 \xe2\x88\x86 \xf0\x9f\x94\x92\"");
  EXPECT_EQ(json_string("\xff"), "\"\\ufffd\"");
  EXPECT_EQ(json_string("\xc3"), "\"\\ufffd\"");                        // truncated sequence
  EXPECT_EQ(json_string("\xc0\xaf"), "\"\\ufffd\\ufffd\"");             // overlong
  EXPECT_EQ(json_string("\xed\xa0\x80"), "\"\\ufffd\\ufffd\\ufffd\"");  // surrogate
}

TEST(format, printable_escapes_what_a_terminal_would_interpret) {
  EXPECT_EQ(printable("ok name"), "ok name");
  EXPECT_EQ(printable("a\nb\x1b[31m"), "a\\x0Ab\\x1B[31m");
  EXPECT_EQ(printable("back\\slash"), "back\\\\slash");
  EXPECT_EQ(printable("\xc3\xa9\xff"), "\xc3\xa9\\xFF");
}

TEST(format, human_duration) {
  EXPECT_EQ(human_duration(0ms), "0ms");
  EXPECT_EQ(human_duration(850ms), "850ms");
  EXPECT_EQ(human_duration(12345ms), "12.3s");
  EXPECT_EQ(human_duration(59999ms), "59.9s");
  EXPECT_EQ(human_duration(303s), "5m03s");
  EXPECT_EQ(human_duration(2h + 5min + 7s), "2h05m");
  EXPECT_EQ(human_duration(-1ms), "expired");
}

TEST(format, empty_outputs) {
  EXPECT_EQ(sqllock_cli::locks_json(std::vector<sqllock::lock_info>{}), "[]\n");
  EXPECT_EQ(sqllock_cli::locks_table(std::vector<sqllock::lock_info>{}), "NAME  HOLDER  FENCE  ACQUIRED (UTC)  EXPIRES (UTC)  TIME LEFT\n");
}

TEST(format, table_aligns_columns) {
  const std::chrono::system_clock::time_point t{std::chrono::milliseconds(1'764'074'096'789)};  // 2025-11-25T12:34:56.789Z
  sqllock::lock_info a{"deploy", "host:1:ab", 7, 1, 12300ms, "owner-a", t, t + 30s};
  sqllock::lock_info b{"x", "h", 123, 2, 500ms, "owner-b", {}, {}};  // times unknown
  EXPECT_EQ(sqllock_cli::locks_table({a, b}),
            "NAME    HOLDER     FENCE  ACQUIRED (UTC)        EXPIRES (UTC)         TIME LEFT\n"
            "deploy  host:1:ab      7  2025-11-25T12:34:56Z  2025-11-25T12:35:26Z  12.3s\n"
            "x       h            123  -                     -                     500ms\n");
  const std::string json = sqllock_cli::locks_json({a, b});
  EXPECT_NE(json.find("\"acquired_at\": \"2025-11-25T12:34:56.789Z\", \"expires_at\": \"2025-11-25T12:35:26.789Z\""),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"acquired_at\": null, \"expires_at\": null"), std::string::npos) << json;
  // Wide characters take two columns, combining marks none.
  EXPECT_EQ(sqllock_cli::display_width("\xe9\x8c\xa0\xe5\x89\x8d"), 4u);
  EXPECT_EQ(sqllock_cli::display_width("cafe\xcc\x81"), 4u);
}

// Derived row names (the library's rw_name.cpp / permit_name.cpp formats) decode to the user's
// name; anything else, a 255-byte lock name that looks alike included, stays a plain lock.
TEST(format, status_rows_decode_derived_row_names) {
  const auto padded = [](std::string s) { return s.size() < 256 ? s + std::string(256 - s.size(), '.') : s; };
  const auto row = [](std::string name) { return sqllock::lock_info{std::move(name), "h", 1, 1, 1000ms, "o", {}, {}}; };
  const auto writer = sqllock_cli::status_row_of(row(padded("sqllock.rwlock.3.a.b.writer")));
  EXPECT_EQ(writer.lock.name, "a.b");
  EXPECT_EQ(writer.what, sqllock_cli::status_row::kind::read_write);
  EXPECT_FALSE(writer.shared);
  const auto reader = sqllock_cli::status_row_of(
      row(padded("sqllock.rwlock.2.db.reader.6014bb26ddea54bcdb8be39fb9715de9.00000000000000000000")));
  EXPECT_EQ(reader.lock.name, "db");
  EXPECT_TRUE(reader.shared);
  const auto permit = sqllock_cli::status_row_of(row(padded("sqllock.semaphore.4.jobs.permit.12")));
  EXPECT_EQ(permit.lock.name, "jobs");
  EXPECT_EQ(permit.what, sqllock_cli::status_row::kind::semaphore);
  EXPECT_EQ(permit.permit, 12);
  for (const std::string& plain : {std::string("sqllock.rwlock.2.db.writer"), padded("sqllock.rwlock.2.db.writer").substr(0, 255),
                                  padded("sqllock.rwlock.9.db.writer"), padded("sqllock.semaphore.4.jobs.permit.x")}) {
    const auto r = sqllock_cli::status_row_of(row(plain));
    EXPECT_EQ(r.what, sqllock_cli::status_row::kind::lock) << plain;
    EXPECT_EQ(r.lock.name, plain);
  }
  const auto rows = sqllock_cli::status_rows({row(padded("sqllock.rwlock.2.db.reader.x.1")), row("db"),
                                              row(padded("sqllock.rwlock.2.db.writer")),
                                              row(padded("sqllock.rwlock.2.db.reader.x.2"))});
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(sqllock_cli::mode_text(rows[0]), "");
  EXPECT_EQ(sqllock_cli::mode_text(rows[1]), "exclusive");
  EXPECT_EQ(sqllock_cli::mode_text(rows[2]), "shared (2 readers)");
  EXPECT_EQ(sqllock_cli::mode_text(rows[3]), "shared (2 readers)");
}

// A reader-writer lease's fence row (its fencing counter: no holder, never a hold) is the
// library's bookkeeping: `status` lists the lease once per holder under its own name, never the
// fence row, not even when a listing hands one over.
TEST(format, status_rows_leave_out_the_reader_writer_fence_row) {
  const auto padded = [](std::string s) { return s.size() < 256 ? s + std::string(256 - s.size(), '.') : s; };
  const auto row = [](std::string name) { return sqllock::lock_info{std::move(name), "h", 1, 1, 1000ms, "o", {}, {}}; };
  const auto rows = sqllock_cli::status_rows(
      {row(padded("sqllock.rwlock.2.db.fence")), row(padded("sqllock.rwlock.2.db.writer")), row("plain")});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].lock.name, "db");
  EXPECT_EQ(sqllock_cli::mode_text(rows[0]), "exclusive");
  EXPECT_EQ(rows[1].lock.name, "plain");
  const std::string table = sqllock_cli::locks_table(
      std::vector<sqllock::lock_info>{row(padded("sqllock.rwlock.2.db.fence")), row(padded("sqllock.rwlock.2.db.writer"))}, {});
  EXPECT_EQ(table.find("sqllock.rwlock"), std::string::npos) << table;
  EXPECT_EQ(table.find("fence"), std::string::npos) << table;
}

// With fair-mode waiters, status prints the lock table, a blank line and the queue table: the
// same column rules (two spaces apart, POS right-aligned like FENCE, wide characters counted twice).
TEST(format, table_with_a_queue_aligns_both_tables) {
  sqllock::lock_info a{"job", "h", 4, 1, 2s, "owner-a", {}, {}};
  const std::vector<sqllock::queue_info> queue{{"job", "w-a", 1, 1500ms, 2s},
                                               {"job", "waiter-b", 2, 250ms, 2s},
                                               {"x", "\xe9\x8c\xa0", 3, 61s, 2s}};
  EXPECT_EQ(sqllock_cli::locks_table({a}, queue),
            "NAME  HOLDER  FENCE  ACQUIRED (UTC)  EXPIRES (UTC)  TIME LEFT\n"
            "job   h           4  -               -              2.0s\n"
            "\n"
            "WAITING FOR  POS  WAITER    WAITED\n"
            "job            1  w-a       1.5s\n"
            "job            2  waiter-b  250ms\n"
            "x              1  \xe9\x8c\xa0        1m01s\n");
}
