"""Where in the spec file a piece of its SQL sits: `file:line:column`, and the line itself with a
caret under the spot, printed under the error's one line (as sqlglot and compilers show them).

sqlglot parses the SQL after mask_window renamed Spark's window functions, so its columns count
that text; they are mapped back to the SQL as written before anything is shown.
"""

from __future__ import annotations

import re
from pathlib import Path

import sqlglot
from sqlglot import exp

from jobs.errors import Place, place
from jobs.spec.model import QuerySpec

# sqlglot's wording for a clause it could not finish, by the class it was building.
_CLAUSES = {
    "Where": "WHERE",
    "Having": "HAVING",
    "Group": "GROUP BY",
    "Join": "JOIN",
    "From": "FROM",
    "Select": "SELECT",
    "Order": "ORDER BY",
    "Case": "CASE",
    "Cast": "CAST",
}
_MISSING = re.compile(r"Required keyword: '\w+' missing for <class '[\w.]*\.(\w+)'>")


def node_place(spec: QuerySpec, node: exp.Expr | None, masked_sql: str) -> Place:
    """The place of the first token of `node` (the spec's SQL line when no token knows it)."""
    for part in node.walk() if node is not None else ():
        meta = getattr(part, "meta", {})
        if meta.get("line") and "start" in meta:
            line_start = masked_sql.rfind("\n", 0, meta["start"]) + 1
            return sql_place(spec, meta["line"], meta["start"] - line_start, meta["end"] - line_start + 1, masked_sql)
        if meta.get("line"):
            return sql_place(spec, meta["line"], None, None, masked_sql)
    return Place(place(spec.spec_path, spec.sql_line))


def parse_error_place(spec: QuerySpec, info: dict, masked_sql: str) -> Place:
    """The place sqlglot's parse error points at: its highlighted token, which ends at `col`."""
    line, end, token = info.get("line"), info.get("col"), info.get("highlight") or ""
    if not line or not end:
        return Place(place(spec.spec_path, spec.sql_line))
    return sql_place(spec, line, max(end - len(token), 0), end, masked_sql)


def readable(info: dict) -> str:
    """sqlglot's description of a parse error in the words of the SQL it is about."""
    description, token = info.get("description", "does not parse"), info.get("highlight")
    missing = _MISSING.fullmatch(description)
    if missing:
        clause = _CLAUSES.get(missing.group(1))
        return f"incomplete {clause}" if clause else "an expression is incomplete"
    if description == "Invalid expression / Unexpected token" and token:
        return f"unexpected {token!r}"
    return f"{description} (at {token!r})" if token else description


def sql_place(spec: QuerySpec, line: int, start: int | None, end: int | None, masked_sql: str) -> Place:
    """file:line:column of SQL line `line`, masked columns [start, end) (0-based), with the excerpt."""
    written = _line(spec.sql, line)
    file_line = spec.sql_line + line - 1
    if start is None or end is None or written is None:
        return Place(place(spec.spec_path, file_line))
    masked = _line(masked_sql, line) or written
    first, last = _unmasked(spec, written, masked, start), _unmasked(spec, written, masked, max(end, start + 1))
    indent = _indent_in_file(spec.spec_path, file_line, written)
    caret = " " * ((indent or 0) + first) + "^" * max(last - first, 1)
    excerpt = f"  {' ' * (indent or 0)}{written}\n  {caret}"
    if indent is None:  # the file holds the SQL line otherwise (folded, quoted): no file column
        return Place(place(spec.spec_path, file_line), excerpt=excerpt)
    return Place(f"{place(spec.spec_path, file_line)}:{indent + first + 1}", excerpt=excerpt)


def _line(text: str, line: int) -> str | None:
    lines = text.splitlines()
    return lines[line - 1] if 0 < line <= len(lines) else None


def _unmasked(spec: QuerySpec, written: str, masked: str, column: int) -> int:
    """The column of the written line that masking moved to `column`."""
    from jobs.plan.sql import mask_window  # sql.py imports this module

    if written == masked:
        return min(column, len(written))
    for original in range(len(written) + 1):
        if len(mask_window(spec, written[:original])) >= column:
            return original
    return len(written)


def _indent_in_file(path: Path, file_line: int, written: str) -> int | None:
    """How far the SQL line sits from the start of its line in the spec file; None when that
    line does not hold it as written."""
    try:
        raw = path.read_text().splitlines()[file_line - 1]
    except (OSError, IndexError):
        return None
    found = raw.find(written) if written.strip() else -1
    return found if found >= 0 else None


def token_error_place(spec: QuerySpec, exc: sqlglot.errors.TokenError, masked_sql: str) -> Place:
    """Where the tokenizer stopped: the end of the text it quotes as context."""
    quoted = re.fullmatch(r"Error tokenizing '(.*)'", str(exc), re.DOTALL)
    found = masked_sql.find(quoted.group(1)) if quoted else -1
    if quoted is None or found < 0:
        return Place(place(spec.spec_path, spec.sql_line))
    stop = found + len(quoted.group(1)) - 1
    line_start = masked_sql.rfind("\n", 0, stop) + 1
    return sql_place(spec, masked_sql.count("\n", 0, stop) + 1, stop - line_start, stop - line_start + 1, masked_sql)
