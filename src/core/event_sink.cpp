// The event sink (see event_sink.hpp).
#include "core/event_sink.hpp"

#include "core/permit_name.hpp"

namespace sqllock {

std::string_view to_string(event_kind kind) noexcept {
  switch (kind) {
    case event_kind::acquired: return "acquired";
    case event_kind::renewed: return "renewed";
    case event_kind::at_risk: return "at_risk";
    case event_kind::lost: return "lost";
    case event_kind::released: return "released";
    case event_kind::statement_error: return "statement_error";
  }
  return "unknown";
}

}  // namespace sqllock

namespace sqllock::detail {

void event_sink::emit(event_kind kind, std::string_view row_name, std::int64_t token,
                      const event_fields& f) const noexcept {
  if (!on_event_) return;
  lease_event e;
  e.kind = kind;
  e.backend = backend_;
  e.name = row_name;
  if (auto p = permit_of(row_name)) {
    e.name = p->first;
    e.permit = p->second;
  }
  e.fencing_token = token;
  e.holder = holder_;
  e.waited = f.waited;
  e.held = f.held;
  e.ttl = f.ttl;
  e.time_left = f.time_left;
  e.statement = f.statement;
  e.code = f.code;
  e.reason = f.reason;
  std::string complaint;
  try {
    on_event_(e);
    return;
  } catch (const std::exception& ex) {
    try {
      complaint = std::string("on_event hook threw on a ") + std::string(to_string(kind)) + " event: " + ex.what();
    } catch (...) {
    }
  } catch (...) {
    try {
      complaint = "on_event hook threw something that is not a std::exception";
    } catch (...) {
    }
  }
  if (!log_) return;
  try {
    log_(log_level::warning, complaint);
  } catch (...) {
    // A throwing log callback: nothing else can be done here.
  }
}

void event_sink::emit_error(const sqllock::error& e, std::string_view row_name, std::int64_t token) const noexcept {
  if (!on_event_) return;
  emit(event_kind::statement_error, row_name, token,
       {.statement = e.statement(), .code = e.code(), .reason = e.what()});
}

std::function<void(const std::string&, std::int64_t)> event_sink::later(event_kind kind, event_fields f,
                                                                          std::string reason) const {
  return [self = shared_from_this(), kind, f, reason = std::move(reason)](const std::string& name, std::int64_t token) {
    event_fields g = f;
    g.reason = reason;
    self->emit(kind, name, token, g);
  };
}

}  // namespace sqllock::detail
