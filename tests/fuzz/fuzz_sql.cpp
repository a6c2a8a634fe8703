// libFuzzer target: the SQL lexer (quotes, comments, dollar quotes) and the migration statement
// splitter built on it, in every dialect.
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/sql_lexer.hpp"
#include "fuzz_common.hpp"
#include "sqllock/migrations.hpp"

using namespace sqllock_fuzz;
using sqllock::dialect;
namespace d = sqllock::detail;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  for (dialect dia : {dialect::sqlite, dialect::postgresql, dialect::mysql}) {
    // The lexer: every span starts where asked, has a length within the text, and one that
    // claims to be terminated ends inside it.
    for (std::size_t i = 0; i < input.size(); ++i) {
      const d::sql_span s = d::sql_span_at(input, i, dia);
      if (s.kind == d::sql_span_kind::none) {
        expect(s.length == 0, "a code position has a span length", input);
        continue;
      }
      expect(s.length >= 1 && s.length <= input.size() - i, "span length outside the text", input);
      if (!s.terminated) expect(i + s.length == input.size(), "an unterminated span stops before the end", input);
      expect(s.kind != d::sql_span_kind::dollar_string || dia == dialect::postgresql,
             "a dollar-quoted string outside PostgreSQL", input);
    }
    // The splitter: statements, or invalid_argument with a message (unterminated quote or comment,
    // bad DELIMITER); every statement is non-empty and trimmed.
    std::vector<std::string> out;
    if (accepted([&] { out = sqllock::split_sql_statements(input, dia); }, input)) {
      for (const auto& st : out) {
        expect(!st.empty(), "an empty statement", input);
        expect(!std::isspace(static_cast<unsigned char>(st.front())) &&
                   !std::isspace(static_cast<unsigned char>(st.back())),
               "a statement with surrounding blanks", input);
        expect(st.size() <= input.size(), "a statement longer than the script", input);
      }
    }
  }
  return 0;
}
