// The language as chat templates use it, each expected output jinja2's: loops and the loop
// object, scoping (why templates need namespace()), macros, operators with Python's semantics,
// filters, tests, str / dict / list methods, slicing and the globals.
#include <gtest/gtest.h>

#include "tests/jinja/render.h"

namespace offgen::jinja {
namespace {

using test::Case;
using test::error_of;
using test::render;

const char* const kMessages =
    R"({"messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"},)"
    R"( {"role": "assistant", "content": "yo", "tool_calls": [{"function": {"name": "f"}}]}]})";

const Case kLoops[] = {
    {"{% for x in [1,2,3] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 "
     "}}"
     "{{ loop.first }}{{ loop.last }}{{ loop.length }}|{% endfor %}",
     "", "1032TrueFalse3|2121FalseFalse3|3210FalseTrue3|"},
    {"{% for x in [1,2,3] %}{{ loop.previtem }}/{{ loop.nextitem }}/{{ loop.cycle('a','b') }}|{% "
     "endfor %}",
     "", "/2/a|1/3/b|2//a|"},
    {"{% for x in [1,1,2] %}{{ loop.changed(x) }}{% endfor %}", "", "TrueFalseTrue"},
    {"{% for x in [1,2,3,4] %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}"
     "{% endif %}{{ x }}{% endfor %}",
     "", "13"},
    {"{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", R"({"d": {"a": 1, "b": [2]}})",
     "a=1;b=[2];"},
    {"{% for k in d %}{{ k }}{% endfor %}{% for ch in 'héllo' %}[{{ ch }}]{% endfor %}",
     R"({"d": {"a": 1, "b": 2}})", "ab[h][é][l][l][o]"},
    {"{% for a, (b, c) in [[1, [2, 3]]] %}{{ a }}{{ b }}{{ c }}{% endfor %}", "", "123"},
    {"{% for m in messages if m.role != 'system' %}{{ loop.index }}/{{ loop.length }}:{{ m.role }} "
     "{% else %}none{% endfor %}",
     kMessages, "1/2:user 2/2:assistant "},
    {"{% for m in messages if m.role == 'x' %}{{ m }}{% else %}none{% endfor %}", kMessages,
     "none"},
    {"{% for x in [1,2] %}{% for y in [3,4] %}{{ loop.index }}{{ x }}{{ y }} {% endfor %}"
     "{{ loop.index }}|{% endfor %}",
     "", "113 214 1|123 224 2|"},
    {"{% for x in [1,2] %}{% set outer = loop %}{% for y in [3] %}{{ outer.index }}{% endfor %}{% "
     "endfor %}",
     "", "12"},
};

const Case kScoping[] = {
    // A set inside a loop does not leak out of it, and each iteration starts afresh.
    {"{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}", "", "1"},
    {"{% set x = 5 %}{% for i in [1,2] %}{{ x }}{% set x = i %}{{ x }}{% endfor %}[{{ x }}]", "",
     "5152[5]"},
    {"{% for i in [1,2] %}{% if i == 1 %}{% set x = 'I' %}{% endif %}[{{ x }}]{% endfor %}", "",
     "[I][]"},
    {"{% for i in [1, 2] %}{% endfor %}[{{ i }}]", "", "[]"},
    {"{% if true %}{% set x = 5 %}{% endif %}{{ x }}", "", "5"},
    // namespace() carries state out of loops.
    {"{% set ns = namespace(found=false, n=0) %}{% for m in messages %}{% if m.role == 'user' %}"
     "{% set ns.found = true %}{% endif %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.found }} {{ "
     "ns.n }}",
     kMessages, "True 3"},
    {"{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns['b'] }}{{ ns.c }}", "", "12"},
    {"{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = 1, %}{{ t }}", "", "12(1,)"},
    {"{% set x %}hello {{ 1 + 1 }}{% endset %}[{{ x }}]{% set y | upper %}abc{% endset %}{{ y }}",
     "", "[hello 2]ABC"},
    {"{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]", "", "3[]"},
    {"{% filter upper %}abc{{ 'd' }}{% endfilter %}", "", "ABCD"},
    {"{% set messages = messages[1:] %}{{ messages|length }}", kMessages, "2"},
    {"{% generation %}gen {{ 1 }}{% endgeneration %}", "", "gen 1"},
    {"{% print 'p', 1 %}", "", "p1"},
};

const Case kMacros[] = {
    {"{% macro greet(name, greeting='Hello') %}{{ greeting }}, {{ name }}!{% endmacro %}"
     "{{ greet('A') }} {{ greet('B', 'Hi') }} {{ greet(name='C', greeting='Yo') }}",
     "", "Hello, A! Hi, B! Yo, C!"},
    {"{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}", "",
     "321"},
    {"{% macro f(a, b=a) %}{{ a }}{{ b }}{% endmacro %}{{ f(1) }}", "", "11"},
    {"{% macro m(a) %}[{{ a }}]{% endmacro %}{{ m() }}", "", "[]"},
    // Names resolve when the macro is called, in the scope it was defined in.
    {"{% macro m() %}{{ x }}{% endmacro %}{% set x = 'X' %}{{ m() }}", "", "X"},
    {"{% set y = 'Y' %}{% macro m() %}{{ y }}{% set y = 'Z' %}{{ y }}{% endmacro %}{{ m() }}{{ y "
     "}}",
     "", "YZY"},
    {"{% macro m(s) %}{{ s|trim }}{% endmacro %}{{ m('  x  ') ~ '|' }}{{ m('a') is string }}", "",
     "x|True"},
};

const Case kOperators[] = {
    {"{{ 7 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ 2 ** 10 "
     "}} "
     "{{ 2 ** -1 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }}",
     "", "3.5 3 -4 2 3.0 0.5 1024 0.5 64 4"},
    {"{{ true + 1 }} {{ 'ab' * 2 }} {{ 2 * [0] }} {{ [1] + [2] }} {{ (1,) + (2,) }} {{ 'a' + 'b' "
     "}}",
     "", "2 abab [0, 0] [1, 2] (1, 2) ab"},
    // ~ binds tighter than + and -, looser than * and /.
    {"{{ 10 - 2 - 3 }} {{ 2 * 3 + 4 }} {{ 'a' ~ 2 * 3 }} {{ not 1 == 2 }} {{ 1 < 2 and 2 < 3 or "
     "false }}",
     "", "5 10 a6 True True"},
    {"{{ 1 == 1.0 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 'é' "
     "> 'z' }}",
     "", "True True True True False True"},
    {"{{ 'a' in 'cat' }} {{ 1 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 3 not in [1] }} {{ 'x' in u }}",
     "", "True True True True False"},
    {"{{ true and 'x' }}{{ 0 or 'y' }}{{ '' and 'z' }}{{ not 0 }}{{ not 'a' }}", "", "xyTrueFalse"},
    {"{{ 1 if true else 2 }}{{ 1 if false else 2 }}{{ 'a' if none else 'b' if true else 'c' }}", "",
     "12b"},
    {"{{ 'Hello %s, %d%%!' % ('x', 3) }} {{ '%s' % 'one' }} {{ '%r' % 'q' }}", "",
     "Hello x, 3%! one 'q'"},
    // A filter applies to the negated operand: -3|abs is (-3)|abs.
    {"{{ -3|abs }} {{ -(3)|abs }} {{ (-3)|abs }}", "", "3 3 3"},
    {"{{ 'a' 'b' }} {{ 1_000 }} {{ 0x1F }} {{ 0o17 }} {{ 0b101 }} {{ 1.5e3 }} {{ 1_0.0_1 }}", "",
     "ab 1000 31 15 5 1500.0 10.01"},
    {R"({{ 'a\tb\x41\u00e9\U0001F600\101\\n' }}|{{ 'a\qb' }})", "", "a\tbAé😀A\\n|a\\qb"},
    {"{{ x.0 }}{{ x.1.0 }}{{ [1, 2,] }}{{ {'a': 1,} }}", R"({"x": [1, [2]]})", "12[1, 2]{'a': 1}"},
};

const Case kFilters[] = {
    {"{{ '  x  '|trim }}|{{ 'xxaxx'|trim('x') }}|{{ 'aBc'|upper }}|{{ 'aBc'|lower }}|"
     "{{ 'hello wORLD'|capitalize }}|{{ 'hello-world (x) [y] <z> {w}'|title }}",
     "", "x|a|ABC|abc|Hello world|Hello-World (X) [Y] <Z> {W}"},
    {"{{ [3, 1, 2]|sort }}|{{ [3, 1, 2]|sort(reverse=true) }}|{{ ['b', 'A', 'c']|sort }}|"
     "{{ ['b', 'A', 'c']|sort(case_sensitive=true) }}",
     "", "[1, 2, 3]|[3, 2, 1]|['A', 'b', 'c']|['A', 'b', 'c']"},
    {"{{ messages|sort(attribute='role')|map(attribute='role')|join(',') }}", kMessages,
     "assistant,system,user"},
    {"{{ [1, 2, 3]|first }}{{ [1, 2, 3]|last }}{{ []|first }}{{ 'abc'|last }}|{{ [1, 2]|length }}"
     "{{ 'héllo'|length }}{{ {'a': 1}|count }}",
     "", "13c|251"},
    {"{{ [1, 2, 3]|join(', ') }}|{{ messages|join('|', attribute='role') }}|{{ [1, [2]]|join }}",
     kMessages, "1, 2, 3|system|user|assistant|1[2]"},
    {"{{ 'abc'|list }}|{{ {'a': 1}|list }}|{{ (1, 2)|list }}", "", "['a', 'b', 'c']|['a']|[1, 2]"},
    {"{{ messages|selectattr('role', 'equalto', 'user')|map(attribute='content')|list }}|"
     "{{ messages|rejectattr('role', 'in', ['user', 'system'])|map(attribute='content')|list }}|"
     "{{ messages|selectattr('tool_calls', 'defined')|list|length }}",
     kMessages, "['hi']|['yo']|1"},
    {"{{ [1, 2, 3, 4]|select('odd')|list }}|{{ [1, 2, 3, 4]|reject('even')|list }}|"
     "{{ [0, 1, '', none, 'x']|select|list }}|{{ [1, 5]|select('gt', 2)|list }}",
     "", "[1, 3]|[1, 3]|[1, 'x']|[5]"},
    {"{{ messages|map(attribute='tool_calls', default='-')|list }}", kMessages,
     "['-', '-', [{'function': {'name': 'f'}}]]"},
    {"{{ messages|map(attribute='tool_calls.0.function.name', default='-')|list }}", kMessages,
     "['-', '-', 'f']"},
    {"{{ ['a', 'B']|map('upper')|list }}|{{ [1.5, 2.5]|map('round')|list }}|{{ [' a "
     "']|map('trim')|join }}",
     "", "['A', 'B']|[2.0, 2.0]|a"},
    {"{{ [1, 2, 1, 'a', 'A']|unique|list }}|{{ ['a', 'A']|unique(case_sensitive=true)|list }}", "",
     "[1, 2, 'a']|['a', 'A']"},
    {"{% if messages|selectattr('role', 'equalto', 'nobody') %}a generator is always true{% endif "
     "%}",
     kMessages, "a generator is always true"},
    {"{{ '42'|int + 1 }} {{ '4.7'|int }} {{ 'z'|int }} {{ 'z'|int(-1) }} {{ 3.99|int }} "
     "{{ '0x1f'|int(0, 16) }} {{ ' 7 '|int }} {{ '1_000'|int }} {{ none|int }}",
     "", "43 4 0 -1 3 31 7 1000 0"},
    {"{{ '1.5'|float }} {{ 'x'|float }} {{ 2|float }} {{ '1e3'|float }} {{ 'inf'|float }}", "",
     "1.5 0.0 2.0 1000.0 inf"},
    {"{{ '٣'|int }} {{ '3 个'|int }} {{ '١٢.٥'|float }} {{ 'é😀'|float }}", "", "3 0 12.5 0.0"},
    {"{{ 2.5|round }} {{ 3.5|round }} {{ 3.14159|round(2) }} {{ 2.675|round(2) }} "
     "{{ 3.14159|round(2, 'floor') }} {{ 3.1|round(0, 'ceil') }} {{ 7|round }}",
     "", "2.0 4.0 3.14 2.67 3.14 4.0 7"},
    {"{{ 'hello world'|replace('o', '0') }}|{{ 'aaa'|replace('a', 'b', 2) }}|{{ 'abc'|replace('', "
     "'-') }}",
     "", "hell0 w0rld|bba|-a-b-c-"},
    {"{{ 'a\\nb\\n\\nc'|indent }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent('> ', "
     "blank=true) }}",
     "", "a\n    b\n\n    c|  a\n  b|a\n> \n> b"},
    {R"({{ '<a href="x">&'|escape }}|{{ '<b>'|safe }})", "", "&lt;a href=&#34;x&#34;&gt;&amp;|<b>"},
    {"{{ '%s and %s'|format('a', 1) }}|{{ '%d%%'|format(3.7) }}", "", "a and 1|3%"},
    {"{{ {'b': 1, 'a': 2}|dictsort }}|{{ {'b': 1, 'a': 2}|dictsort(by='value', reverse=true) }}|"
     "{{ {'b': 1}|items|list }}",
     "", "[('a', 2), ('b', 1)]|[('a', 2), ('b', 1)]|[('b', 1)]"},
    {"{{ [3, 1, 2]|min }}{{ [3, 1, 2]|max }}{{ ['b', 'A']|min }}|{{ []|max }}|{{ [1, 2, 3]|sum }}",
     "", "13A||6"},
    {"{{ [1, 2, 3]|reverse|list }}{{ 'abc'|reverse }}", "", "[3, 2, 1]cba"},
};

const Case kTests[] = {
    {"{{ x is string }}{{ x is number }}{{ x is mapping }}{{ x is iterable }}{{ x is sequence }}",
     R"({"x": "s"})", "TrueFalseFalseTrueTrue"},
    {"{{ 1 is number }} {{ true is number }} {{ true is integer }} {{ 1.0 is float }} {{ true is "
     "boolean }}",
     "", "True True False True True"},
    {"{{ [] is sequence }} {{ {} is sequence }} {{ {} is mapping }} {{ 1 is iterable }} {{ none is "
     "none }}",
     "", "True True True False True"},
    {"{{ 3 is odd }} {{ 2 is even }} {{ 6 is divisibleby 3 }} {{ 6 is divisibleby(4) }} {{ 'a' is "
     "in ['a'] }}",
     "", "True True True False True"},
    {"{{ 2 is eq 2 }} {{ 2 is equalto(2) }} {{ 2 is ne 2 }} {{ 'x' is lower }} {{ 'X' is upper }}",
     "", "True True False True True"},
    {"{{ none is sameas none }} {{ 0 is sameas false }} {{ range is callable }} {{ x is not none "
     "}}",
     "", "True False True True"},
};

const Case kMethods[] = {
    {"{{ '  a b  '.strip() }}|{{ 'xxaxx'.lstrip('x') }}|{{ 'xxaxx'.rstrip('x') }}|{{ ' a "
     "'.rstrip() }}|",
     "", "a b|axx|xxa| a|"},
    {"{{ 'a,b,,c'.split(',') }}{{ ' a  b '.split() }}{{ 'a b c'.split(' ', 1) }}{{ 'a b "
     "c'.rsplit(' ', 1) }}",
     "", "['a', 'b', '', 'c']['a', 'b']['a', 'b c']['a b', 'c']"},
    {"{{ '  a b  c  '.split(none, 1) }}{{ '  a b  c  '.rsplit(none, 1) }}{{ "
     "'a\\nb\\r\\nc'.splitlines() }}",
     "", "['a', 'b  c  ']['  a b', 'c']['a', 'b', 'c']"},
    {"{{ 'Hello'.startswith('He') }}{{ 'Hello'.endswith(('x', 'lo')) }}{{ 'héllo'.find('l') }}"
     "{{ 'hello'.rfind('l') }}{{ 'hello'.find('z') }}{{ 'hello'.count('l') }}",
     "", "TrueTrue23-12"},
    {"{{ ', '.join(['a', 'b']) }}|{{ '-'.join('abc') }}|{{ 'abc'.removeprefix('a') }}{{ "
     "'abc'.removesuffix('c') }}",
     "", "a, b|a-b-c|bcab"},
    {"{{ 'hello world'.title() }}|{{ \"they're\".title() }}|{{ 'hELLO'.capitalize() }}|{{ "
     "'ß'.upper() }}|"
     "{{ 'ÀÉÎ'.lower() }}|{{ 'straße'.title() }}",
     "", "Hello World|They'Re|Hello|SS|àéî|Straße"},
    {"{{ '{} is {}'.format('a', 1) }}|{{ '{0}{1}{0}'.format('x', 'y') }}|{{ "
     "'{name}!'.format(name='n') }}|"
     "{{ '{{}}'.format() }}|{{ '{!r}'.format('q') }}",
     "", "a is 1|xyx|n!|{}|'q'"},
    {"{{ '123'.isdigit() }}{{ 'ab'.isalpha() }}{{ ' '.isspace() }}{{ 'ab'.islower() }}{{ "
     "'AB'.isupper() }}",
     "", "TrueTrueTrueTrueTrue"},
    {"{{ d.get('a') }}{{ d.get('z') }}{{ d.get('z', 5) }}{{ d.keys()|list }}{{ d.values()|list }}"
     "{{ d.items()|list }}",
     R"({"d": {"a": 1, "b": 2}})", "1None5['a', 'b'][1, 2][('a', 1), ('b', 2)]"},
    // x.name is the method where Python has one; x['name'] the key.
    {"{{ d['items'] }} {{ d.content }}", R"({"d": {"items": 1, "content": "c"}})", "1 c"},
    {"{{ [1, 2, 1].index(2) }}{{ [1, 2, 1].count(1) }}{{ (1, 2).index(1) }}", "", "120"},
};

const Case kSlicesAndGlobals[] = {
    {"{{ 'abc'[1:] }}{{ 'abc'[::-1] }}{{ 'héllo'[1:3] }}{{ [1, 2, 3, 4][::2] }}{{ [1, 2, 3][-2:] }}"
     "{{ (1, 2, 3)[:1] }}{{ [1, 2, 3][5:] }}{{ [1, 2, 3][::-2] }}",
     "", "bccbaél[1, 3][2, 3](1,)[][3, 1]"},
    {"{{ messages[1:]|length }}{{ messages[:-1]|map(attribute='role')|join }}", kMessages,
     "2systemuser"},
    {"{{ range(3)|list }}{{ range(1, 10, 3)|list }}{{ range(5, 0, -2)|list }}{{ range(2)|length }}",
     "", "[0, 1, 2][1, 4, 7][5, 3, 1]2"},
    {"{{ dict(a=1, b=2) }}{{ dict([('x', 1)]) }}{{ namespace(a=1).a }}", "",
     "{'a': 1, 'b': 2}{'x': 1}1"},
};

void expect_cases(const char* table, const Case* begin, const Case* end) {
  for (const Case* c = begin; c != end; ++c) {
    SCOPED_TRACE(std::string(table) + ": " + c->source);
    EXPECT_EQ(render(c->source, c->context), c->expected);
  }
}

TEST(JinjaSemantics, Loops) {
  expect_cases("loops", std::begin(kLoops), std::end(kLoops));
}
TEST(JinjaSemantics, Scoping) {
  expect_cases("scoping", std::begin(kScoping), std::end(kScoping));
}
TEST(JinjaSemantics, Macros) {
  expect_cases("macros", std::begin(kMacros), std::end(kMacros));
}
TEST(JinjaSemantics, Operators) {
  expect_cases("operators", std::begin(kOperators), std::end(kOperators));
}
TEST(JinjaSemantics, Filters) {
  expect_cases("filters", std::begin(kFilters), std::end(kFilters));
}
TEST(JinjaSemantics, Tests) {
  expect_cases("tests", std::begin(kTests), std::end(kTests));
}
TEST(JinjaSemantics, Methods) {
  expect_cases("methods", std::begin(kMethods), std::end(kMethods));
}
TEST(JinjaSemantics, SlicesAndGlobals) {
  expect_cases("slices", std::begin(kSlicesAndGlobals), std::end(kSlicesAndGlobals));
}

TEST(JinjaSemantics, RaiseExceptionCarriesTheTemplatesMessage) {
  const std::string source =
      "{% for m in messages %}\n"
      "{% if m.role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}\n"
      "{% endfor %}";
  EXPECT_EQ(error_of(source, kMessages),
            "chat template test, line 2: the template raised an error: System role not supported");
  EXPECT_EQ(
      error_of("{% macro m() %}\n\n{{ raise_exception('in ' ~ 'macro') }}{% endmacro %}{{ m() }}"),
      "chat template test, line 3: the template raised an error: in macro");
}

TEST(JinjaSemantics, StrftimeNowFormatsTheGivenTimeInLocalTime) {
  const auto now =
      std::chrono::system_clock::from_time_t(1700049600) + std::chrono::microseconds(42);
  const ChatTemplate chat(
      "{{ strftime_now('%Y') }}|{{ strftime_now('%f%z%Z') }}|{{ strftime_now('%%') }}", "test");
  EXPECT_EQ(chat.render(nlohmann::ordered_json::object(), now), "2023|000042|%");
  // Without a time it reads the clock.
  const std::string year = render("{{ strftime_now('%Y') }}");
  EXPECT_EQ(year.size(), 4u);
}

TEST(JinjaSemantics, TheSandboxForbidsMutatingMethods) {
  EXPECT_EQ(error_of("{{ x.append(1) }}", R"({"x": []})"),
            "chat template test, line 1: access to attribute 'append' of 'list' object is unsafe.");
  EXPECT_EQ(error_of("{% set _ = d.update({}) %}", R"({"d": {}})"),
            "chat template test, line 1: access to attribute 'update' of 'dict' object is unsafe.");
  EXPECT_EQ(render("[{{ x.pop }}]", R"({"x": []})"), "[]");  // unsafe, but printing is allowed
}

TEST(JinjaSemantics, PythonErrorsAreErrors) {
  EXPECT_EQ(error_of("{{ 1 / 0 }}"), "chat template test, line 1: division by zero");
  EXPECT_EQ(error_of("{{ 'a' + 1 }}"),
            "chat template test, line 1: unsupported operand type(s) for +: 'str' and 'int'");
  EXPECT_EQ(error_of("{{ 1 in 'abc' }}"),
            "chat template test, line 1: 'in <string>' requires string as left operand, not int");
  EXPECT_EQ(error_of("{{ [1, 'a']|sort }}"),
            "chat template test, line 1: '<' not supported between instances of 'str' and 'int'");
  EXPECT_EQ(error_of("{% for x in none %}{% endfor %}"),
            "chat template test, line 1: 'NoneType' object is not iterable");
  EXPECT_EQ(error_of("{% for a, b in [[1, 2, 3]] %}{% endfor %}"),
            "chat template test, line 1: too many values to unpack (expected 2)");
  EXPECT_EQ(error_of("{{ [1, 2][::0] }}"), "chat template test, line 1: slice step cannot be zero");
  EXPECT_EQ(error_of("{{ x[1:y] }}", R"({"x": [1]})"),
            "chat template test, line 1: slice indices must be integers or None or have an "
            "__index__ method");
  EXPECT_EQ(error_of("{{ [1]|map('string')|length }}"),
            "chat template test, line 1: object of type 'generator' has no len()");
  EXPECT_EQ(error_of("{% set z = 1 %}{% set z.a = 2 %}"),
            "chat template test, line 1: cannot assign attribute on non-namespace object ('z')");
  EXPECT_EQ(
      error_of("{{ range(200000)|length }}"),
      "chat template test, line 1: Range too big. The sandbox blocks ranges larger than MAX_RANGE "
      "(100000).");
}

}  // namespace
}  // namespace offgen::jinja
