// Shared by the fuzz targets: property assertions that abort (libFuzzer then saves the input).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

#include "sqllock/error.hpp"

namespace sqllock_fuzz {

[[noreturn]] inline void fail(const char* what, std::string_view input) {
  std::fprintf(stderr, "PROPERTY VIOLATED: %s\n  input (%zu bytes): ", what, input.size());
  for (unsigned char c : input) std::fprintf(stderr, c >= 0x20 && c < 0x7f ? "%c" : "\\x%02x", c);
  std::fprintf(stderr, "\n");
  std::abort();
}

inline void expect(bool ok, const char* what, std::string_view input) {
  if (!ok) fail(what, input);
}

/// Runs fn; returns true if it returned, false if it threw sqllock::invalid_argument (with a
/// message). Any other exception is a bug: abort.
template <class Fn>
bool accepted(Fn&& fn, std::string_view input, std::string* message = nullptr) {
  try {
    fn();
    return true;
  } catch (const sqllock::invalid_argument& e) {
    expect(e.what()[0] != '\0', "invalid_argument without a message", input);
    expect(e.backend().empty(), "invalid_argument names a backend", input);
    if (message) *message = e.what();
    return false;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "unexpected exception: %s\n", e.what());
    fail("rejected with something other than sqllock::invalid_argument", input);
  } catch (...) {
    fail("threw a non-std exception", input);
  }
}

}  // namespace sqllock_fuzz
