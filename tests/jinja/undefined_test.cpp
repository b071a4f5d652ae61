// jinja2's default Undefined: printing it gives "", it is false, empty when iterated, has length
// 0, passes `is defined` / `default` checks; a missing key or index of a defined value is
// Undefined too. Doing anything else with it (an attribute of it, arithmetic, calling it) is an
// error that says what was undefined, as jinja2's UndefinedError does.
#include <gtest/gtest.h>

#include "tests/jinja/render.h"

namespace offgen::jinja {
namespace {

using test::Case;
using test::error_of;
using test::render;

const Case kUndefinedCases[] = {
    {"[{{ u }}]", "", "[]"},
    {"{{ u is defined }} {{ u is undefined }} {{ u is none }} {{ u is string }}", "",
     "False True False False"},
    {"{{ u is sequence }} {{ u is iterable }} {{ u is mapping }} {{ u is number }}", "",
     "True True False False"},
    {"{% if u %}T{% else %}F{% endif %}{% for x in u %}x{% endfor %}{{ u|length }}", "", "F0"},
    {"{{ u|default('d') }} {{ none|default('d') }} {{ ''|default('d', true) }} {{ u|d('e') }}", "",
     "d None d e"},
    {"{{ u == u }} {{ u == none }} {{ u != 1 }} {{ 'x' in u }} {{ u in [1] }}", "",
     "True False True False False"},
    {"{{ u ~ 'x' }}|{{ u|trim }}|{{ u|upper }}|{{ u|string }}|{{ u|list }}|{{ u|join(',') }}", "",
     "x||||[]|"},
    {"{{ u|first is defined }} {{ u|items|list }}", "", "False []"},
    // Missing keys, attributes and indices of defined values are Undefined.
    {"{{ d.x }}|{{ d['x'] }}|{{ d.x is defined }}|{{ d.get('x') }}", R"({"d": {}})",
     "||False|None"},
    {"{{ l[5] }}|{{ l[-1] }}|{{ l[-5] }}|{{ l[5] is defined }}", R"({"l": [1, 2]})", "|2||False"},
    {"{{ 'abc'[9] }}|{{ 'abc'.nothing }}|{{ none.x }}|{{ none['x'] }}|{{ 1.x }}", "", "||||"},
    {"{{ messages[0].role if messages else 'none' }}", R"({"messages": []})", "none"},
    {"{{ 'a' if false }}|{{ ('a' if false) is defined }}", "", "|False"},
    {"{% if tools is not defined or tools is none %}no tools{% endif %}", "", "no tools"},
};

TEST(JinjaUndefined, BehavesAsJinja2sDefaultUndefined) {
  for (const Case& c : kUndefinedCases) {
    SCOPED_TRACE(c.source);
    EXPECT_EQ(render(c.source, c.context), c.expected);
  }
}

TEST(JinjaUndefined, UsingItFailsNamingWhatWasUndefined) {
  EXPECT_EQ(error_of("{{ foo.bar }}"), "chat template test, line 1: 'foo' is undefined");
  EXPECT_EQ(error_of("x\n{{ foo['bar'] }}"), "chat template test, line 2: 'foo' is undefined");
  EXPECT_EQ(error_of("{{ d.x.y }}", R"({"d": {}})"),
            "chat template test, line 1: 'dict object' has no attribute 'x'");
  EXPECT_EQ(error_of("{{ l[3].role }}", R"({"l": []})"),
            "chat template test, line 1: list object has no element 3");
  EXPECT_EQ(error_of("{{ u + 1 }}"), "chat template test, line 1: 'u' is undefined");
  EXPECT_EQ(error_of("{{ -u }}"), "chat template test, line 1: 'u' is undefined");
  EXPECT_EQ(error_of("{{ u() }}"), "chat template test, line 1: 'u' is undefined");
  EXPECT_EQ(error_of("{{ u < 1 }}"), "chat template test, line 1: 'u' is undefined");
  EXPECT_EQ(error_of("{{ u|int }}"), "chat template test, line 1: 'u' is undefined");
  EXPECT_EQ(error_of("{{ u[1:] }}"), "chat template test, line 1: 'u' is undefined");
}

TEST(JinjaUndefined, ErrorsNameTheLineOfTheInnermostExpression) {
  const std::string source =
      "{% for m in messages %}\n"
      "{{ m.role }}\n"
      "{{ m.content.missing.deeper }}\n"
      "{% endfor %}";
  EXPECT_EQ(error_of(source, R"({"messages": [{"role": "user", "content": {}}]})"),
            "chat template test, line 3: 'dict object' has no attribute 'missing'");
}

}  // namespace
}  // namespace offgen::jinja
