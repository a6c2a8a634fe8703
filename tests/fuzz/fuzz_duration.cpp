// libFuzzer target: parse_duration and validate_ttl against an independent reference grammar.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_common.hpp"
#include "sqllock/parse.hpp"

using namespace sqllock_fuzz;

namespace {

constexpr std::int64_t ten_years_ms = 10LL * 366 * 24 * 3'600'000;

// Reference: [0-9]+(ms|s|m|h), value at most ten years. Returns -1 when it must be rejected.
std::int64_t reference(std::string_view s) {
  std::size_t i = 0;
  __int128 n = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
    n = n * 10 + (s[i] - '0');
    if (n > (static_cast<__int128>(1) << 100)) n = static_cast<__int128>(1) << 100;  // saturate
    ++i;
  }
  if (i == 0) return -1;
  std::string_view unit = s.substr(i);
  __int128 factor = unit == "ms" ? 1 : unit == "s" ? 1000 : unit == "m" ? 60'000 : unit == "h" ? 3'600'000 : 0;
  if (factor == 0) return -1;
  __int128 ms = n * factor;
  if (ms > ten_years_ms) return -1;
  return static_cast<std::int64_t>(ms);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  std::chrono::milliseconds got{};
  std::string message;
  bool ok = accepted([&] { got = sqllock::parse_duration(input); }, input, &message);
  std::int64_t want = reference(input);
  expect(ok == (want >= 0), ok ? "accepted a duration the grammar rejects" : "rejected a valid duration", input);
  if (ok) {
    expect(got.count() == want, "parsed to the wrong number of milliseconds", input);
    bool ttl_ok = accepted([&] { sqllock::validate_ttl(got); }, input);
    expect(ttl_ok == (got.count() >= 1), "validate_ttl disagrees with ttl >= 1 ms", input);
  } else {
    expect(message.find("duration") != std::string::npos, "rejection message does not say what was wrong", input);
  }
  // validate_ttl on arbitrary values: never anything but invalid_argument.
  if (size >= 8) {
    std::int64_t raw = 0;
    for (int k = 0; k < 8; ++k) raw = static_cast<std::int64_t>(static_cast<std::uint64_t>(raw) << 8 | data[k]);
    bool ttl_ok = accepted([&] { sqllock::validate_ttl(std::chrono::milliseconds(raw)); }, input);
    expect(ttl_ok == (raw >= 1 && raw <= ten_years_ms), "validate_ttl bounds", input);
  }
  return 0;
}
