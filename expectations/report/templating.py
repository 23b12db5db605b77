"""The one jinja2 environment the report pages render through.

Autoescape is on for every template: report values come from the user's data (a row may hold
`<script>`), and only the chart SVGs, which matplotlib writes, are marked safe. StrictUndefined
makes a template that names a missing field fail in the tests instead of printing nothing.
"""

from __future__ import annotations

from functools import cache

from jinja2 import Environment, PackageLoader, StrictUndefined


@cache
def environment() -> Environment:
    return Environment(
        loader=PackageLoader("expectations.report", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def render(template: str, **context) -> str:
    return environment().get_template(template).render(**context)
