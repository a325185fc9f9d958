#!/usr/bin/env python3
"""Reference renderings of chat templates by Python's jinja2, set up as
Hugging Face transformers sets it up for apply_chat_template: a sandboxed
environment with trim_blocks and lstrip_blocks, the loop-control extension,
raise_exception, tojson without ASCII escaping, and strftime_now at a fixed
time (so the output does not depend on the day the test runs).

usage: jinja_reference.py CASES.json  ->  prints a JSON list, one entry per
case: {"ok": text} or {"error": message}. A case is {"template", "context"}.
"""
import datetime
import json
import sys

from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

FIXED_NOW = datetime.datetime(2026, 11, 30, 12, 0, 0)


class TemplateError(Exception):
    pass


def raise_exception(message):
    raise TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def main():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: FIXED_NOW.strftime(fmt)
    out = []
    for case in json.load(open(sys.argv[1], encoding="utf-8")):
        try:
            text = env.from_string(case["template"]).render(**case["context"])
            out.append({"ok": text})
        except Exception as e:  # raise_exception, template errors, recursion, ...
            out.append({"error": str(e)})
    sys.stdout.write(json.dumps(out, ensure_ascii=False))


if __name__ == "__main__":
    main()
