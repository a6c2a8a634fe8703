// Permit row names of counting semaphores (see permit_name.hpp).
#include "core/permit_name.hpp"

#include <charconv>

namespace sqllock::detail {

namespace {
constexpr std::string_view prefix = "sqllock.semaphore.";
constexpr std::size_t min_row_name = 256;  // one more than the longest lock name

std::string semaphore_part(std::string_view semaphore) {
  std::string out(prefix);
  out += std::to_string(semaphore.size());
  out += '.';
  out.append(semaphore);
  return out;
}
}  // namespace

std::string permit_row_name(std::string_view semaphore, int slot) {
  std::string out = semaphore_part(semaphore);
  out += ".permit.";
  out += std::to_string(slot);
  if (out.size() < min_row_name) out.append(min_row_name - out.size(), '.');
  return out;
}

std::string permit_queue_key(std::string_view semaphore) { return semaphore_part(semaphore) + ".permits"; }

std::optional<std::string> permit_queue_of(std::string_view row_name) {
  if (row_name.size() < min_row_name || !row_name.starts_with(prefix)) return std::nullopt;
  std::string_view rest = row_name.substr(prefix.size());
  std::size_t len = 0;
  const auto [p, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), len);
  if (ec != std::errc() || p == rest.data() || *p != '.') return std::nullopt;
  rest.remove_prefix(static_cast<std::size_t>(p - rest.data()) + 1);
  if (rest.size() < len) return std::nullopt;
  return permit_queue_key(rest.substr(0, len));
}

std::optional<std::pair<std::string_view, int>> permit_of(std::string_view row_name) {
  if (row_name.size() < min_row_name || !row_name.starts_with(prefix)) return std::nullopt;
  std::string_view rest = row_name.substr(prefix.size());
  std::size_t len = 0;
  const auto [p, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), len);
  if (ec != std::errc() || p == rest.data() || *p != '.') return std::nullopt;
  rest.remove_prefix(static_cast<std::size_t>(p - rest.data()) + 1);
  if (rest.size() < len) return std::nullopt;
  const std::string_view semaphore = rest.substr(0, len);
  rest.remove_prefix(len);
  constexpr std::string_view permit = ".permit.";
  if (!rest.starts_with(permit)) return std::nullopt;
  rest.remove_prefix(permit.size());
  int slot = 0;
  const auto [q, ec2] = std::from_chars(rest.data(), rest.data() + rest.size(), slot);
  if (ec2 != std::errc() || q == rest.data()) return std::nullopt;
  return std::pair{semaphore, slot};
}

}  // namespace sqllock::detail
