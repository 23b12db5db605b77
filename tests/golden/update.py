"""Rewrite every golden `explain` plan from the current planner, after an intended change:

    python -m tests.golden.update        (make golden)

Review the diff before committing it; the tests only ever compare against these files."""

from __future__ import annotations

from tests.golden.explain_cases import CASES, explained, golden_of


def main() -> None:
    changed = 0
    for spec_path in CASES:
        text, golden = explained(spec_path), golden_of(spec_path)
        if not golden.exists() or golden.read_text() != text:
            golden.write_text(text)
            changed += 1
            print(f"rewrote {golden.relative_to(golden.parents[3])}")
    print(f"{changed} of {len(CASES)} golden plans rewritten")


if __name__ == "__main__":
    main()
