// libFuzzer target: validate_lock_name against an independent UTF-8 decoder (1..255 bytes, no NUL).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_common.hpp"
#include "sqllock/parse.hpp"

using namespace sqllock_fuzz;

namespace {

// Reference UTF-8 check written from the Unicode table of well-formed byte sequences (Table 3-7).
bool well_formed_utf8(std::string_view s) {
  auto in = [](unsigned char c, unsigned lo, unsigned hi) { return c >= lo && c <= hi; };
  std::size_t i = 0;
  while (i < s.size()) {
    const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + i;
    std::size_t left = s.size() - i;
    if (p[0] <= 0x7F) {
      i += 1;
    } else if (in(p[0], 0xC2, 0xDF)) {
      if (left < 2 || !in(p[1], 0x80, 0xBF)) return false;
      i += 2;
    } else if (in(p[0], 0xE0, 0xEF)) {
      if (left < 3) return false;
      unsigned lo = p[0] == 0xE0 ? 0xA0 : 0x80, hi = p[0] == 0xED ? 0x9F : 0xBF;
      if (!in(p[1], lo, hi) || !in(p[2], 0x80, 0xBF)) return false;
      i += 3;
    } else if (in(p[0], 0xF0, 0xF4)) {
      if (left < 4) return false;
      unsigned lo = p[0] == 0xF0 ? 0x90 : 0x80, hi = p[0] == 0xF4 ? 0x8F : 0xBF;
      if (!in(p[1], lo, hi) || !in(p[2], 0x80, 0xBF) || !in(p[3], 0x80, 0xBF)) return false;
      i += 4;
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  std::string message;
  bool ok = accepted([&] { sqllock::validate_lock_name(input); }, input, &message);
  bool want = size >= 1 && size <= 255 && input.find('\0') == std::string_view::npos && well_formed_utf8(input);
  expect(ok == want, ok ? "accepted an invalid lock name" : "rejected a valid lock name", input);
  if (!ok) {
    expect(message.find("lock name") != std::string::npos, "rejection message does not name the lock name", input);
    // The message quotes the name only in escaped, printable form: no raw control bytes.
    for (unsigned char c : message) expect(c >= 0x20 && c < 0x7f, "raw control or non-ASCII byte in the message", input);
  }
  return 0;
}
