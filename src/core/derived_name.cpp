// Derived row names of reader-writer locks and semaphore permits (see derived_name.hpp).
#include "core/derived_name.hpp"

#include <charconv>

namespace sqllock::detail {

std::string derived_base(std::string_view prefix, std::string_view name) {
  std::string out(prefix);
  out += std::to_string(name.size());
  out += '.';
  out.append(name);
  return out;
}

std::string derived_padded(std::string s) {
  if (s.size() < derived_row_min) s.append(derived_row_min - s.size(), '.');
  return s;
}

std::optional<std::pair<std::string_view, std::string_view>> derived_parse(std::string_view prefix,
                                                                           std::string_view row_name) {
  if (row_name.size() < derived_row_min || !row_name.starts_with(prefix)) return std::nullopt;
  std::string_view rest = row_name.substr(prefix.size());
  std::size_t len = 0;
  const auto [p, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), len);
  if (ec != std::errc() || p == rest.data() || p == rest.data() + rest.size() || *p != '.') return std::nullopt;
  rest.remove_prefix(static_cast<std::size_t>(p - rest.data()) + 1);
  // Lock names are 1..255 bytes (one less than derived_row_min).
  if (len == 0 || len >= derived_row_min || rest.size() < len) return std::nullopt;
  return std::pair{rest.substr(0, len), rest.substr(len)};
}

}  // namespace sqllock::detail
