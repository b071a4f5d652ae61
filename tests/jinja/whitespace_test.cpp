// Whitespace control, where most renderers part ways with jinja2: trim_blocks (the newline after
// %} and #} goes, not after }}), lstrip_blocks (indentation before {% and {# goes, not before
// {{, and only when nothing else precedes the tag on its line), the - and + modifiers, raw
// blocks, newline normalisation and the one trailing newline jinja2 drops. Expected outputs are
// jinja2 3.1's with transformers' settings.
#include <gtest/gtest.h>

#include "tests/jinja/render.h"

namespace offgen::jinja {
namespace {

using test::Case;
using test::render;

const Case kWhitespaceCases[] = {
    // trim_blocks: the newline right after a block tag goes, the next one stays.
    {"a\n{% if true %}\nb\n{% endif %}\nc", "", "a\nb\nc"},
    {"{% if true %}\n\n{% endif %}", "", "\n"},
    {"{{ 1 }}\n{{ 2 }}\n", "", "1\n2"},
    {"{{ x }}\n{% if x %}\ny\n{% endif %}", R"({"x": 1})", "1\ny\n"},
    // lstrip_blocks: indentation before a block or comment tag at the start of a line.
    {"a\n  {% if true %}\n  b\n  {% endif %}\nc", "", "a\n  b\nc"},
    {"\t{% if true %}\tx\n\t{% endif %}", "", "\tx\n"},
    {"  {# comment #}\nx", "", "x"},
    {"a\n  \t{# c #}b", "", "a\nb"},
    // ... but not before {{ }}, nor when text precedes the tag on its line.
    {"a\n  {{ 'x' }}  \nb", "", "a\n  x  \nb"},
    {"{{ 'a' }}  {% if true %}  x{% endif %}", "", "a    x"},
    {"a {{ 'b' }}\n   {% if true %}c{% endif %}", "", "a b\nc"},
    // Unicode whitespace counts as indentation (Python's \s).
    {"x\n \u00a0{% if true %}y{% endif %}", "", "x\ny"},
    // The - modifier strips all whitespace, newlines included, on its side.
    {"a  {%- if true -%}  b  {%- endif -%}  c", "", "abc"},
    {"a\n  {{- 'x' -}}  \nb", "", "axb"},
    {"x  {#- comment -#}  \n y", "", "xy"},
    {"{%- set x = 1 -%}\n\n  {{- x -}}\n\n", "", "1"},
    {"x\n    {%- if true %}\n    y\n    {%- endif %}\nz", "", "x    yz"},
    {"{% if true -%}\n\n   a\n{%- endif %}", "", "a"},
    {"{%- if true %}a{% endif -%}\u00a0\u2003b", "", "ab"},
    {"{{x}}{{-x-}}{{ x-}}{{-x }}", R"({"x": 5})", "5555"},
    {"{{- ' a ' -}}", "", " a "},
    // The + modifier keeps what lstrip_blocks / trim_blocks would remove.
    {"  {%+ if true %}b{% endif %}", "", "  b"},
    {"a{%+ if true %}b{% endif +%}\nc", "", "ab\nc"},
    {"{% for i in range(2) +%}\n{{ i }}\n{% endfor %}", "", "\n0\n\n1\n"},
    {"a {#- c -#} b {#+ c +#}\n c", "", "ab \n c"},
    // Loops: the classic chat template layouts.
    {"{% for m in messages %}\n  {{ m }}\n{% endfor %}\n", R"({"messages": ["a", "b"]})",
     "  a\n  b\n"},
    {"{%- for m in messages -%}\n  {{ m }}\n{%- endfor -%}\n", R"({"messages": ["a", "b"]})", "ab"},
    {"{% for i in range(2) %}\n    {% if i %}\n        x\n    {% endif %}\n{% endfor %}", "",
     "        x\n"},
    // Raw blocks: output verbatim; trim_blocks does not apply after {% raw %}.
    {"{% raw %}{{ x }}{% endraw %}", "", "{{ x }}"},
    {"a\n  {% raw %}\n {{ x }}\n  {% endraw %}\nb", "", "a\n\n {{ x }}\nb"},
    {"  {%- raw -%}  {{ a }}  {%- endraw -%}  b", "", "{{ a }}b"},
    // Newlines: \r\n and \r become \n; exactly one trailing newline goes.
    {"a\r\nb\rc\n", "", "a\nb\nc"},
    {"a\n\n", "", "a\n"},
    {"{% if true %}a{% endif %}\r\n{% if true %}b{% endif %}\r\n", "", "ab"},
    // Tags that span lines, and delimiters inside strings.
    {"{% if true\n  and true %}\n  ok\n{% endif %}", "", "  ok\n"},
    {"{ a } {x} {{ '}}' }} {{ \"{%\" }} %} #}", "", "{ a } {x} }} {% %} #}"},
    {"{{ {'a': {'b': 1}}['a']['b'] }}", "", "1"},
    {"{{ x }}", R"({"x": "{{ not a template }}"})", "{{ not a template }}"},
};

TEST(JinjaWhitespace, MatchesJinja2) {
  for (const Case& c : kWhitespaceCases) {
    SCOPED_TRACE(c.source);
    EXPECT_EQ(render(c.source, c.context), c.expected);
  }
}

TEST(JinjaWhitespace, EmptyTemplateRendersNothing) {
  EXPECT_EQ(render(""), "");
  EXPECT_EQ(render("\n"), "");
  EXPECT_EQ(render("{# only a comment #}"), "");
}

}  // namespace
}  // namespace offgen::jinja
