"""The patterns tests/test_no_private_references.py looks for: pointers to text a reader of this
repository cannot open (numbered issues, sections of notes not in the repository, development
history). Also used on generated output (tests/test_demo.py).
"""

from __future__ import annotations

import re

# (name, pattern). Case-insensitive; each must match a whole pointer, not a word that merely
# resembles one.
PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    # "issue 7", "Issue 2 section 3", "issues 3 and 5"; not RocketMQ's "[ISSUE #5789]".
    ("numbered issue", re.compile(r"\bissues? \d+", re.I)),
    # A directory next to the checkout, never part of it.
    ("path outside the repository",
     re.compile(r"\.\./shared\b|/work/shared\b|\bshared/(?:seeds|reference)\b", re.I)),
    # Sections of private notes.
    ("section of a private note", re.compile(r"\breference (?:§|section\b)", re.I)),
    ("private note", re.compile(r"\bplatform[- ]notes?\b", re.I)),
    ("private note", re.compile(r"\breal-clients\b", re.I)),
    ("private note", re.compile(r"\brocketmq-(?:ha|more)-reference\b", re.I)),
    ("section of a private note", re.compile(r"\bref\.? §", re.I)),
    ("appendix of a private note", re.compile(r"\bAppendix [AB]\b(?![a-z])")),
    # The source documents by number or file name ("seed 173" is a random seed: not flagged).
    ("source document by number", re.compile(r"\bseeds? 00[0-4]\b", re.I)),
    ("source document by file name", re.compile(r"\b00[0-4]_[0-9a-f]{16}\b", re.I)),
    # Development history.
    ("development history", re.compile(r"\bthis session\b|\bwas once\b", re.I)),
]
# A line of test data that must contain a pointer (see the module docstring); tests/ only.
FIXTURE_MARKER = re.compile(r"#\s*private-reference-fixture\s*$")
# "§2" is fine after a document of this repository ("datasets/README.md §2"); on its own it points
# at a section of something the reader cannot tell, let alone open.
SECTION = re.compile(r"§\s?\d")
NAMED_DOCUMENT = re.compile(r"[\w/-]+\.(?:md|ipynb|py)`?\s*(?:§\s?[\d.]+[a-z]?(?:,| and)?\s*)*$")


def hits_in(text: str, allow_fixtures: bool = False) -> list[tuple[int, str, str]]:
    """(line number, kind, matched text) of every pointer in `text`; with `allow_fixtures`, lines
    ending in the fixture marker are skipped."""
    found = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if allow_fixtures and FIXTURE_MARKER.search(line):
            continue
        for what, pattern in PATTERNS:
            m = pattern.search(line)
            if m:
                found.append((lineno, what, m.group(0)))
                break
        else:
            for m in SECTION.finditer(line):
                if not NAMED_DOCUMENT.search(line[:m.start()]):
                    context = line[max(0, m.start() - 20):m.end() + 4]
                    found.append((lineno, "section of no named document", context))
                    break
    return found
