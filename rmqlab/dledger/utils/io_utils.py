"""IOUtils (io.openmessaging.storage.dledger.utils.IOUtils, 0.3.1.2): the small properties files a
DLedger member keeps (`currterm`, `checkpoint`).

`string_to_file` writes as IOUtils.string2File does: the new content to `<file>.tmp`, the old one
(if any) to `<file>.bak`, then the temporary file renamed into place. DLedger does not fsync them;
the machine-crash model keeps such small renamed files (rmqlab.runtime.page_cache).
"""

from __future__ import annotations

import os


def string_to_file(text: str, file_name: str) -> None:
    os.makedirs(os.path.dirname(file_name) or ".", exist_ok=True)
    with open(file_name + ".tmp", "w", encoding="utf-8") as f:
        f.write(text)
    previous = file_to_string(file_name)
    if previous is not None:
        with open(file_name + ".bak", "w", encoding="utf-8") as f:
            f.write(previous)
    os.replace(file_name + ".tmp", file_name)


def file_to_string(file_name: str) -> str | None:
    """The file's text, or None when it does not exist."""
    try:
        with open(file_name, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        return None


def string_to_properties(text: str) -> dict[str, str]:
    """`key=value` lines (Java Properties' plain form, which is all DLedger writes); comments and
    blank lines skipped."""
    props: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "!")) or "=" not in line:
            continue
        key, _, value = line.partition("=")
        props[key.strip()] = value.strip()
    return props
