#!/usr/bin/env python3
"""Golden renders of the chat templates in tests/data/chat_templates/ by Python's jinja2.

What it makes:

  tests/data/chat_templates/goldens.json
      {"generator", "jinja2", "now", "cases": [...]}
        now     the Unix time strftime_now() formats (noon UTC, so the date is the same in
                every time zone from UTC-12 to UTC+11); the C++ test renders with it too.
        cases   {"template", "scenario", "context", "expected"} where the render succeeds, or
                {"template", "scenario", "context", "error"} where the template calls
                raise_exception(message): error is that message.
      Every template is rendered with every scenario (system + user, user only, multi-turn with
      and without the generation prompt, unicode, quotes / newlines / backslashes / literal
      template syntax in the content, tool definitions and calls, bad role orders, list
      content, an empty message, a reasoning trace). A scenario a template cannot render for a
      reason other than raise_exception (list content where it expects a string, say) is left
      out, and said so on stdout.

The environment is transformers' (_compile_jinja_template in transformers/utils/
chat_template_utils.py), rebuilt here so transformers is not needed: an
ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and the loopcontrols extension,
a {% generation %} tag that renders its body (transformers' AssistantTracker, inactive), tojson
as json.dumps(x, ensure_ascii=False, indent, separators, sort_keys), and the globals
raise_exception(message) and strftime_now(format).

Needs jinja2 >= 3.1 (Debian: apt-get install python3-jinja2). Deterministic; re-run after
changing a template or a scenario:

    python3 tools/make_chat_template_goldens.py
"""

import json
import os
import sys
from datetime import datetime

import jinja2
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEMPLATE_DIR = os.path.join(REPO, "tests", "data", "chat_templates")
OUT = os.path.join(TEMPLATE_DIR, "goldens.json")

NOW = 1700049600  # 2023-11-15 12:00:00 UTC

# bos_token / eos_token as each template's model family spells them.
TOKENS = {
    "llama3.jinja": ("<|begin_of_text|>", "<|eot_id|>"),
    "llama31_tools.jinja": ("<|begin_of_text|>", "<|eot_id|>"),
    "llama2.jinja": ("<s>", "</s>"),
    "mistral.jinja": ("<s>", "</s>"),
    "qwen2.jinja": ("", "<|im_end|>"),
    "smollm2.jinja": ("<|im_start|>", "<|im_end|>"),
    "gemma.jinja": ("<bos>", "<eos>"),
    "namespace_last.jinja": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
}
DEFAULT_TOKENS = ("<s>", "</s>")

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city, e.g. \"Paris\""},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
TIME_TOOL = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Current time (ISO 8601) in a time zone.",
        "parameters": {
            "type": "object",
            "properties": {"zone": {"type": "string"}, "precise": {"type": "boolean"}},
            "required": [],
        },
    },
}
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the web; returns at most `limit` results.",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string"}, "limit": {"type": "integer", "default": 5}},
            "required": ["query"],
        },
    },
}

SCENARIOS = [
    ("system_user", {
        "messages": [
            {"role": "system", "content": "You are a concise assistant."},
            {"role": "user", "content": "What is the capital of France?"},
        ],
        "add_generation_prompt": True,
    }),
    ("user_only", {
        "messages": [{"role": "user", "content": "Hello!"}],
        "add_generation_prompt": True,
    }),
    ("multi_turn", {
        "messages": [
            {"role": "user", "content": "Name a prime number."},
            {"role": "assistant", "content": "7"},
            {"role": "user", "content": "  And another one?  "},
        ],
        "add_generation_prompt": True,
    }),
    ("multi_turn_no_prompt", {
        "messages": [
            {"role": "system", "content": "Answer in one word."},
            {"role": "user", "content": "Sky colour?"},
            {"role": "assistant", "content": "Blue."},
        ],
        "add_generation_prompt": False,
    }),
    ("unicode", {
        "messages": [
            {"role": "system", "content": "Réponds en français, s'il te plaît. 日本語も OK。"},
            {"role": "user", "content": "Ça va? 你好 😀 مرحبا — naïve café, ß, Ω, e\u0301"},
            {"role": "assistant", "content": "Très bien ! 🎉"},
            {"role": "user", "content": "\u00a0non-breaking\u3000spaces\u00a0"},
        ],
        "add_generation_prompt": True,
    }),
    ("quotes_newlines", {
        "messages": [
            {"role": "user", "content": "She said \"hi\" and 'bye'.\nNew line\n\n\ttabbed \\ backslash"},
            {"role": "assistant", "content": "Literal {{ not_a_variable }} and {% if x %} and <|im_end|>\n"},
            {"role": "user", "content": "\n  padded with blank lines  \n\n"},
        ],
        "add_generation_prompt": True,
    }),
    ("tools", {
        "messages": [
            {"role": "system", "content": "You can call tools."},
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": "", "tool_calls": [{
                "type": "function",
                "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}},
            }]},
            {"role": "tool", "content": "{\"temperature\": 21.5, \"sky\": \"clear\"}"},
            {"role": "tool", "content": "second result"},
            {"role": "assistant", "content": "It is 21.5 °C and clear."},
            {"role": "user", "content": "Thanks"},
        ],
        "tools": [WEATHER_TOOL, TIME_TOOL, SEARCH_TOOL],
        "add_generation_prompt": True,
    }),
    ("bad_order_two_users", {
        "messages": [
            {"role": "user", "content": "First"},
            {"role": "user", "content": "Second"},
        ],
        "add_generation_prompt": True,
    }),
    ("bad_order_assistant_first", {
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "assistant", "content": "I speak first"},
            {"role": "user", "content": "Hi"},
        ],
        "add_generation_prompt": False,
    }),
    ("list_content", {
        "messages": [
            {"role": "user", "content": [
                {"type": "image"},
                {"type": "text", "text": "  What is in this picture?  "},
            ]},
            {"role": "assistant", "content": [{"type": "text", "text": "A cat."}]},
            {"role": "user", "content": "Thanks"},
        ],
        "add_generation_prompt": True,
    }),
    ("empty_content", {
        "messages": [
            {"role": "user", "content": ""},
            {"role": "assistant", "content": " "},
            {"role": "user", "content": "ok"},
        ],
        "add_generation_prompt": True,
    }),
    ("reasoning", {
        "messages": [
            {"role": "system", "content": "Think first."},
            {"role": "system", "content": "Then answer."},
            {"role": "user", "content": "2+2?"},
            {"role": "assistant", "content": "<think>\n2+2 is 4\n</think>\n\nFour."},
            {"role": "user", "content": "3+3?"},
        ],
        "add_generation_prompt": True,
    }),
]


class Generation(Extension):
    """transformers' {% generation %} tag with its tracker inactive: the body as it is."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def make_environment(now):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(format):
        return now.strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[Generation, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main():
    env = make_environment(datetime.fromtimestamp(NOW))
    names = sorted(n for n in os.listdir(TEMPLATE_DIR) if n.endswith(".jinja"))
    if not names:
        sys.exit(f"no templates in {TEMPLATE_DIR}")
    cases = []
    for name in names:
        with open(os.path.join(TEMPLATE_DIR, name), encoding="utf-8") as f:
            template = env.from_string(f.read())
        bos, eos = TOKENS.get(name, DEFAULT_TOKENS)
        for scenario, variables in SCENARIOS:
            context = {"messages": variables["messages"]}
            if "tools" in variables:
                context["tools"] = variables["tools"]
            context["add_generation_prompt"] = variables["add_generation_prompt"]
            context["bos_token"] = bos
            context["eos_token"] = eos
            case = {"template": name, "scenario": scenario, "context": context}
            try:
                case["expected"] = template.render(**context)
            except jinja2.exceptions.TemplateError as e:
                if type(e) is not jinja2.exceptions.TemplateError:  # a syntax / undefined error
                    print(f"skipped {name} / {scenario}: {type(e).__name__}: {e}")
                    continue
                case["error"] = str(e)
            except Exception as e:  # noqa: BLE001 - a template that cannot take this input
                print(f"skipped {name} / {scenario}: {type(e).__name__}: {e}")
                continue
            cases.append(case)
    out = {
        "generator": "tools/make_chat_template_goldens.py",
        "jinja2": jinja2.__version__,
        "now": NOW,
        "cases": cases,
    }
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    errors = sum("error" in c for c in cases)
    print(f"wrote {OUT}: {len(cases)} cases ({errors} raise_exception) from {len(names)} templates")


if __name__ == "__main__":
    main()
