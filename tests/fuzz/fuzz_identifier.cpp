// libFuzzer target: validate_identifier and quote_identifier (reference grammar, quoting round trip).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_common.hpp"
#include "sqllock/parse.hpp"

using namespace sqllock_fuzz;

namespace {

bool part_ok(std::string_view p) {
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (p.empty() || p.size() > 63 || !alpha(p[0])) return false;
  for (char c : p) {
    if (!alpha(c) && !(c >= '0' && c <= '9')) return false;
  }
  return true;
}

// Reference: part or part.part.
bool reference(std::string_view s) {
  auto dot = s.find('.');
  if (dot == std::string_view::npos) return part_ok(s);
  return part_ok(s.substr(0, dot)) && part_ok(s.substr(dot + 1));
}

// Undo the quoting: a sequence of q...q parts joined by '.', nothing else; no quote inside a part.
bool unquote(const std::string& quoted, char q, std::string& out) {
  out.clear();
  std::size_t i = 0;
  for (int part = 0;; ++part) {
    if (i >= quoted.size() || quoted[i] != q) return false;
    auto close = quoted.find(q, i + 1);
    if (close == std::string::npos) return false;
    if (part > 0) out += '.';
    out += quoted.substr(i + 1, close - i - 1);
    i = close + 1;
    if (i == quoted.size()) return true;
    if (quoted[i] != '.') return false;
    ++i;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  bool want = reference(input);
  bool ok = accepted([&] { sqllock::validate_identifier(input); }, input);
  expect(ok == want, ok ? "accepted an invalid identifier" : "rejected a valid identifier", input);
  for (auto d : {sqllock::dialect::sqlite, sqllock::dialect::postgresql, sqllock::dialect::mysql}) {
    std::string quoted;
    bool q_ok = accepted([&] { quoted = sqllock::quote_identifier(input, d); }, input);
    expect(q_ok == want, "quote_identifier and validate_identifier disagree", input);
    if (!q_ok) continue;
    const char q = d == sqllock::dialect::mysql ? '`' : '"';
    std::string back;
    expect(unquote(quoted, q, back), "quoted identifier is not a clean quoted name", input);
    expect(back == input, "quoting does not round-trip", input);
    // Quoting is idempotent input-wise: a quoted name is never itself a valid identifier.
    expect(!reference(quoted), "quoted output is an unquoted identifier", input);
  }
  return 0;
}
