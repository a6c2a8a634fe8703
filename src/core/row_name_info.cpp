// The public decoding of lock-table row names (client.hpp, decode_row_name): the formats themselves
// are rw_name.cpp's and permit_name.cpp's, over derived_name.cpp's length-prefixed, padded form.
#include "core/permit_name.hpp"
#include "core/rw_name.hpp"
#include "sqllock/client.hpp"

namespace sqllock {

row_name_info decode_row_name(std::string_view row_name) {
  using kind = row_name_info::kind;
  if (const auto rw = detail::rw_row_of(row_name)) {
    const kind what = rw->second == detail::rw_row::writer   ? kind::writer
                      : rw->second == detail::rw_row::reader ? kind::reader
                                                             : kind::rw_fence;
    return {what, std::string(rw->first), -1};
  }
  if (const auto permit = detail::permit_of(row_name)) return {kind::permit, std::string(permit->first), permit->second};
  return {kind::lock, std::string(row_name), -1};
}

}  // namespace sqllock
