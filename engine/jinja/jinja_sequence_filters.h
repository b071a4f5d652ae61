// The filters over sequences (jinja_sequence_filters.cpp), registered in jinja_filters.cpp. Those
// that are generators in jinja2 (map, select, reject, selectattr, rejectattr, unique, items,
// reverse) return an Iterator value, so `| length` on them fails and `| list` is needed, as there.
#pragma once

#include "engine/jinja/jinja_value.h"

namespace offgen::jinja::filters {

Value first(const Value& input, CallArgs& args);
Value last(const Value& input, CallArgs& args);
Value length(const Value& input, CallArgs& args);
Value list(const Value& input, CallArgs& args);
Value join(const Value& input, CallArgs& args);
Value items(const Value& input, CallArgs& args);
Value reverse(const Value& input, CallArgs& args);
Value map(const Value& input, CallArgs& args);
Value select(const Value& input, CallArgs& args);
Value reject(const Value& input, CallArgs& args);
Value selectattr(const Value& input, CallArgs& args);
Value rejectattr(const Value& input, CallArgs& args);
Value unique(const Value& input, CallArgs& args);
Value sort(const Value& input, CallArgs& args);
Value dictsort(const Value& input, CallArgs& args);
Value min(const Value& input, CallArgs& args);
Value max(const Value& input, CallArgs& args);
Value sum(const Value& input, CallArgs& args);

}  // namespace offgen::jinja::filters
