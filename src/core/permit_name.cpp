// Permit row names of counting semaphores (see permit_name.hpp).
#include "core/permit_name.hpp"

#include "core/derived_name.hpp"

#include <charconv>

namespace sqllock::detail {

namespace {
constexpr std::string_view prefix = "sqllock.semaphore.";
}  // namespace

std::string permit_row_name(std::string_view semaphore, int slot) {
  return derived_padded(derived_base(prefix, semaphore) + ".permit." + std::to_string(slot));
}

std::pair<std::string, std::string> permit_rows_range(std::string_view semaphore) {
  std::string lo = derived_base(prefix, semaphore) + ".permit.";
  std::string hi = lo;
  hi.back() = '/';
  return {std::move(lo), std::move(hi)};
}

std::string permit_queue_key(std::string_view semaphore) { return derived_base(prefix, semaphore) + ".permits"; }

std::optional<std::string> permit_queue_of(std::string_view row_name) {
  const auto parsed = derived_parse(prefix, row_name);
  if (!parsed) return std::nullopt;
  return permit_queue_key(parsed->first);
}

std::optional<std::pair<std::string_view, int>> permit_of(std::string_view row_name) {
  const auto parsed = derived_parse(prefix, row_name);
  if (!parsed) return std::nullopt;
  auto [semaphore, rest] = *parsed;
  constexpr std::string_view permit = ".permit.";
  if (!rest.starts_with(permit)) return std::nullopt;
  rest.remove_prefix(permit.size());
  int slot = 0;
  const auto [q, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), slot);
  if (ec != std::errc() || q == rest.data() || slot < 0) return std::nullopt;
  return std::pair{semaphore, slot};
}

}  // namespace sqllock::detail
