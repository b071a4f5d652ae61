// What offgen does not interpret fails with an offgen::Error naming the construct and its line,
// never with output that could differ from jinja2's. Tags (and filter / test names jinja2 itself
// does not know) are refused when the template is loaded, even in a branch a render would not
// take; filters, tests and operations on values that jinja2 has and offgen lacks, when a render
// reaches them. Syntax errors are reported with their line too.
#include <gtest/gtest.h>

#include "engine/core/error.h"
#include "tests/jinja/render.h"

namespace offgen::jinja {
namespace {

using test::error_of;

struct Refusal {
  const char* source;
  const char* message;  // the whole error
};

const Refusal kAtLoad[] = {
    // A filter or test jinja2 does not have either fails when jinja2 compiles the template.
    {"\n{{ x|nosuchfilter }}", "chat template test, line 2: no filter named 'nosuchfilter'"},
    {"{{ x is nosuchtest }}", "chat template test, line 1: no test named 'nosuchtest'"},
    {"{% include 'other.jinja' %}",
     "chat template test, line 1: the {% include %} tag is not supported"},
    {"{% extends 'base.jinja' %}",
     "chat template test, line 1: the {% extends %} tag is not supported"},
    {"{% import 'm.jinja' as m %}",
     "chat template test, line 1: the {% import %} tag is not supported"},
    {"{% from 'm.jinja' import x %}",
     "chat template test, line 1: the {% from %} tag is not supported"},
    {"{% block body %}{% endblock %}",
     "chat template test, line 1: the {% block %} tag is not supported"},
    {"\n{% call m() %}x{% endcall %}",
     "chat template test, line 2: the {% call %} tag is not supported"},
    {"{% autoescape true %}{% endautoescape %}",
     "chat template test, line 1: the {% autoescape %} tag is not supported"},
    {"{% macro m(a) %}\n{{ varargs }}{% endmacro %}",
     "chat template test, line 2: 'varargs' in a macro is not supported"},
    {"{% macro m() %}{{ caller() }}{% endmacro %}",
     "chat template test, line 1: 'caller' in a macro is not supported"},
    {"{% for x in y recursive %}{% endfor %}",
     "chat template test, line 1: recursive for loops are not supported"},
    {"{{ f(*args) }}",
     "chat template test, line 1: unpacking arguments (*args, **kwargs) in a call is not "
     "supported"},
    {"{{ f(**kwargs) }}",
     "chat template test, line 1: unpacking arguments (*args, **kwargs) in a call is not "
     "supported"},
    {"{{ d[1, 2] }}",
     "chat template test, line 1: subscripts with several indices ([a, b]) are not supported"},
    {R"({{ '\N{BULLET}' }})",
     "chat template test, line 1: \\N{...} escapes in string literals are not supported"},
    // jinja2 without the `do` extension, as transformers configures it, does not know {% do %}.
    {"{% do x.append(1) %}", "chat template test, line 1: unknown tag 'do'"},
};

const Refusal kAtRender[] = {
    {"a\nb\n{{ x|wordwrap }}",
     "chat template test, line 3: the filter 'wordwrap' is not supported"},
    {"{{ x|urlize }}", "chat template test, line 1: the filter 'urlize' is not supported"},
    {"{{ 'upper' is filter }}", "chat template test, line 1: the test 'filter' is not supported"},
    {"{{ cycler(1, 2) }}",
     "chat template test, line 1: the global function 'cycler' is not supported"},
    {"{{ 'x'.zfill(3) }}", "chat template test, line 1: the str method 'zfill' is not supported"},
    {"{{ '{:>5}'.format('a') }}",
     "chat template test, line 1: the format field '{:>5}' is not supported (no format specs, "
     "attributes or "
     "indices)"},
    {"{{ '%5d' % 3 }}",
     "chat template test, line 1: the format '%5' is not supported (only %s, %r, %d, %i and %%)"},
    {"{{ 10 ** 40 }}",
     "chat template test, line 1: integer result too large (offgen's ints are 64-bit)"},
    {"{{ 'ΣΑ'.lower() }}",
     "chat template test, line 1: lower-casing U+03A3 (Greek capital sigma) is not supported"},
    {"{{ 'ǅ'|upper }}", "chat template test, line 1: changing the case of U+01C5 is not supported"},
    {"{{ x|map('wordwrap')|list }}",
     "chat template test, line 1: the filter 'wordwrap' is not supported"},
    {"{{ 1 is sameas 1 }}",
     "chat template test, line 1: 'sameas' between a int and a int is not supported"},
    {"{{ 3.5.is_integer() }}",
     "chat template test, line 1: the attribute 'is_integer' of 'float object' is not supported"},
    {"{% for x in [1] %}{{ loop(x) }}{% endfor %}",
     "chat template test, line 1: recursive loop calls (loop(...)) are not supported"},
    // Python prints a namespace holding itself with "{...}"; offgen stops at the cycle.
    {"{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}",
     "chat template test, line 1: a value is nested too deeply (or contains itself) for this "
     "operation"},
    // Markup (|safe, |escape) escapes what + and % add, and its methods their arguments.
    {"{{ 'a'|safe + '<' }}",
     "chat template test, line 1: the operator + on a Markup string (from |safe or |escape) is not "
     "supported"},
    {"{{ ('a'|escape).upper() }}",
     "chat template test, line 1: the methods of a Markup string (from |safe or |escape) are not "
     "supported"},
};

const Refusal kSyntaxErrors[] = {
    {"{% if x %}",
     "chat template test, line 1: the {% if %} tag opened here is never closed (expected {% endif "
     "%})"},
    {"\n{% for x in y %}",
     "chat template test, line 2: the {% for %} tag opened here is never closed (expected {% "
     "endfor %})"},
    {"{% endif %}", "chat template test, line 1: unexpected {% endif %} (no open tag it closes)"},
    {"{{ x ",
     "chat template test, line 1: unexpected end of template: the {{ expression opened here is not "
     "closed"},
    {"a\n{# x", "chat template test, line 2: missing end of comment tag (#})"},
    {"{% raw %}x", "chat template test, line 1: missing end of raw directive ({% endraw %})"},
    {"{{ 'abc }}", "chat template test, line 1: unterminated string literal"},
    {"{{ a b }}", "chat template test, line 1: expected the end of the expression ('}}'), got 'b'"},
    {"{{ a $ b }}", "chat template test, line 1: unexpected character '$'"},
    {"{{ (1, 2 }}", "chat template test, line 1: unexpected '}', expected ')'"},
    {"{% break %}", "chat template test, line 1: 'break' outside a for loop"},
    {"{% for x in [1] %}{% macro m() %}{% continue %}{% endmacro %}{% endfor %}",
     "chat template test, line 1: 'continue' outside a for loop"},
    {"{% set true = 2 %}", "chat template test, line 1: can't assign to the constant 'true'"},
    {"{% macro m(a=1, b) %}{% endmacro %}",
     "chat template test, line 1: non-default argument follows default argument"},
    {"{{ m(a=1, 2) }}",
     "chat template test, line 1: a positional argument follows a keyword argument"},
    {"{{ 99999999999999999999 }}",
     "chat template test, line 1: the integer literal 99999999999999999999 does not fit 64 bits"},
    {"{% frobnicate %}", "chat template test, line 1: unknown tag 'frobnicate'"},
};

void expect_refusals(const Refusal* begin, const Refusal* end) {
  for (const Refusal* r = begin; r != end; ++r) {
    SCOPED_TRACE(r->source);
    EXPECT_EQ(error_of(r->source, R"({"x": [1], "y": [], "d": {}})"), r->message);
  }
}

TEST(JinjaUnsupported, RefusedWhenTheTemplateIsLoaded) {
  for (const Refusal& r : kAtLoad) {
    SCOPED_TRACE(r.source);
    try {
      ChatTemplate(r.source, "test");
      ADD_FAILURE() << "loaded";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), r.message);
    }
  }
}

TEST(JinjaUnsupported, RefusedWhenTheRenderReachesThem) {
  expect_refusals(std::begin(kAtRender), std::end(kAtRender));
  // Where no render reaches them, they are no obstacle.
  EXPECT_EQ(test::render("{% if tools %}{{ tools|groupby('type')|wordwrap }}{% endif %}ok"), "ok");
}

TEST(JinjaUnsupported, SyntaxErrorsNameTheLine) {
  expect_refusals(std::begin(kSyntaxErrors), std::end(kSyntaxErrors));
}

TEST(JinjaUnsupported, MalformedInputIsRefused) {
  EXPECT_EQ(error_of("\xff\xfe"), "chat template test: the template is not valid UTF-8");
  EXPECT_EQ(offgen::test::error_of(
                [] { ChatTemplate("x", "t").render(nlohmann::ordered_json::array()); }),
            "chat template t: the render context must be a JSON object");
  EXPECT_EQ(
      error_of("{{ x }}", R"({"x": 18446744073709551615})"),
      "chat template test: the integer 18446744073709551615 in the context does not fit 64 bits");
  EXPECT_EQ(offgen::test::error_of([] {
              ChatTemplate("{{ x }}", "t").render(nlohmann::ordered_json{{"x", "\xff"}});
            }),
            "chat template t: the context holds a string that is not valid UTF-8");
  const std::string deep = R"({"x": )" + std::string(600, '[') + std::string(600, ']') + "}";
  EXPECT_EQ(
      error_of("{{ x }}", deep),
      "chat template test: a value is nested too deeply (or contains itself) for this operation");
  // Nesting deeper than any real template is refused rather than allowed to exhaust the stack.
  EXPECT_EQ(error_of("{{ " + std::string(400, '(') + "1" + std::string(400, ')') + " }}"),
            "chat template test, line 1: the template nests too deeply");
  EXPECT_EQ(error_of("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"),
            "chat template test, line 1: macro 'f' recursed too deeply");
}

}  // namespace
}  // namespace offgen::jinja
