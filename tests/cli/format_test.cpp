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
  EXPECT_EQ(sqllock_cli::locks_json({}), "[]\n");
  EXPECT_EQ(sqllock_cli::locks_table({}), "NAME  HOLDER  FENCE  TIME LEFT\n");
}

TEST(format, table_aligns_columns) {
  sqllock::lock_info a{"deploy", "host:1:ab", 7, 1, 12300ms};
  sqllock::lock_info b{"x", "h", 123, 2, 500ms};
  EXPECT_EQ(sqllock_cli::locks_table({a, b}),
            "NAME    HOLDER     FENCE  TIME LEFT\n"
            "deploy  host:1:ab      7  12.3s\n"
            "x       h            123  500ms\n");
}
