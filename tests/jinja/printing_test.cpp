// What `{{ x }}` prints is Python's str(x): True / None, floats in repr's shortest form, and
// containers as Python's repr (quotes chosen as Python chooses, escapes for unprintable
// characters). And tojson is transformers' json.dumps(ensure_ascii=False). Expected outputs are
// jinja2's.
#include <gtest/gtest.h>

#include "tests/jinja/render.h"

namespace offgen::jinja {
namespace {

using test::Case;
using test::error_of;
using test::render;

const Case kPrintingCases[] = {
    {"{{ true }} {{ false }} {{ none }} {{ True }} {{ None }}", "", "True False None True None"},
    {"{{ 3 }} {{ -0 }} {{ 1.0 }} {{ -0.0 }} {{ 1.5 }} {{ 0.1 + 0.2 }}", "",
     "3 0 1.0 -0.0 1.5 0.30000000000000004"},
    {"{{ 1e16 }} {{ 1e15 }} {{ 1e-4 }} {{ 1e-5 }} {{ 2.5e-7 }} {{ 1e100 }}", "",
     "1e+16 1000000000000000.0 0.0001 1e-05 2.5e-07 1e+100"},
    {"{{ x }} {{ y }} {{ z }}", R"({"x": 1e22, "y": 123456789.123, "z": 5})",
     "1e+22 123456789.123 5"},
    {"{{ 1/3 }} {{ 10/4 }} {{ 6/2 }}", "", "0.3333333333333333 2.5 3.0"},
    {"{{ [1, 'a', none, true, 1.5] }}", "", "[1, 'a', None, True, 1.5]"},
    {"{{ ('a',) }} {{ () }} {{ (1, 2) }} {{ [(1, 'a')] }}", "", "('a',) () (1, 2) [(1, 'a')]"},
    {"{{ {'k': [1], 'j': {}} }}", "", "{'k': [1], 'j': {}}"},
    {"{{ x }}", R"({"x": {"a": [1, {"b": null}], "c": 1.0, "d": -0.0}})",
     "{'a': [1, {'b': None}], 'c': 1.0, 'd': -0.0}"},
    // repr of strings: single quotes unless the string has one and no double quote.
    {R"({{ ['it\'s', "q\"", 'both \' "', 'a\nb\t\\', '\x00\x7f', 'é', '\u00a0', '😀'] }})", "",
     R"(["it's", 'q"', 'both \' "', 'a\nb\t\\', '\x00\x7f', 'é', '\xa0', '😀'])"},
    {"{{ [x] }}", R"({"x": "zero\u200bwidth"})", R"(['zero\u200bwidth'])"},
    {"{{ d.items() }} {{ d.keys() }} {{ d.values() }}", R"({"d": {"a": 1}})",
     "dict_items([('a', 1)]) dict_keys(['a']) dict_values([1])"},
    {"{{ range(3) }} {{ range(1, 9, 2) }} {{ range(10)[::-1] }} {{ range(10)[2:8:3] }}", "",
     "range(0, 3) range(1, 9, 2) range(9, -1, -1) range(2, 8, 3)"},
    // |safe and |escape make Markup: printed as the text, repr'd as Markup('...').
    {"{{ ['<a>'|escape, 'x'|safe, ('<b>'|safe)|escape, ('<i>'|e)[1:] ~ '!', 'A'|safe|lower] }}", "",
     "[Markup('&lt;a&gt;'), Markup('x'), Markup('<b>'), 'lt;i&gt;!', Markup('a')]"},
    {"{{ '<a>'|escape }} {{ 'x'|safe is escaped }} {{ 'x' is escaped }} {{ ('<'|e)|length }}", "",
     "&lt;a&gt; True False 4"},
    {"{% set ns = namespace(a=1, b='x') %}{{ ns }}", "", "<Namespace {'a': 1, 'b': 'x'}>"},
    {"{% for x in 'ab' %}{{ loop }} {% endfor %}", "", "<LoopContext 1/2> <LoopContext 2/2> "},
    {"{{ u }}|{{ [u] }}", "", "|[Undefined]"},
    {"{{ 'a', 1 }}", "", "('a', 1)"},
    {"{{ 'a' ~ 1 ~ none ~ true ~ 1.0 ~ u ~ [1] }}", "", "a1NoneTrue1.0[1]"},
    {"{{ 1|string ~ none|string ~ [1]|string ~ u|string }}", "", "1None[1]"},
    // tojson: json.dumps with ensure_ascii=False and its separators.
    {"{{ x|tojson }}",
     R"({"x": {"b": [1, 2.0, "é😀\n\"\\\u0001"], "a": {}, "c": [], "d": null, "e": true}})",
     R"({"b": [1, 2.0, "é😀\n\"\\\u0001"], "a": {}, "c": [], "d": null, "e": true})"},
    {"{{ x|tojson(indent=2) }}", R"({"x": {"a": [1, {"c": []}], "b": {}}})",
     "{\n  \"a\": [\n    1,\n    {\n      \"c\": []\n    }\n  ],\n  \"b\": {}\n}"},
    {"{{ x|tojson(indent='\\t', sort_keys=true) }}", R"({"x": {"b": 1, "a": [2]}})",
     "{\n\t\"a\": [\n\t\t2\n\t],\n\t\"b\": 1\n}"},
    {"{{ x|tojson(separators=(',', ':')) }}", R"({"x": {"a": [1, 2]}})", R"({"a":[1,2]})"},
    {"{{ x|tojson(ensure_ascii=true) }}", R"({"x": "é😀"})", R"("\u00e9\ud83d\ude00")"},
    // tojson's first positional parameter is ensure_ascii, not indent.
    {"{{ x|tojson(2) }}", R"({"x": {"a": "é"}})", R"({"a": "\u00e9"})"},
    {"{{ 'x'|tojson }} {{ 1.5|tojson }} {{ 1e100|tojson }} {{ none|tojson }} {{ (1, 2)|tojson }}",
     "", R"("x" 1.5 1e+100 null [1, 2])"},
    // Non-string keys become strings; 1 and True are the same key in Python.
    {"{{ {1: 'a', none: 'b', true: 'c', 1.5: 'd'}|tojson }}", "",
     R"({"1": "c", "null": "b", "1.5": "d"})"},
};

TEST(JinjaPrinting, MatchesPythonStr) {
  for (const Case& c : kPrintingCases) {
    SCOPED_TRACE(c.source);
    EXPECT_EQ(render(c.source, c.context), c.expected);
  }
}

TEST(JinjaPrinting, ValuesPythonPrintsByAddressAreRefused) {
  // Python prints "<built-in method items of dict object at 0x7f...>": no renderer can match.
  EXPECT_NE(error_of("{{ d.items }}", R"({"d": {}})").find("printing a function is not supported"),
            std::string::npos);
  EXPECT_NE(error_of("{{ [1]|map('string') }}").find("printing a generator is not supported"),
            std::string::npos);
}

TEST(JinjaPrinting, TojsonOfWhatJsonCannotHoldFails) {
  EXPECT_NE(error_of("{{ u|tojson }}").find("Object of type Undefined is not JSON serializable"),
            std::string::npos);
  EXPECT_NE(error_of("{{ namespace()|tojson }}").find("Namespace is not JSON serializable"),
            std::string::npos);
}

}  // namespace
}  // namespace offgen::jinja
