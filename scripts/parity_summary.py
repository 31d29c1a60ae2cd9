#!/usr/bin/env python3
"""Recounts the Summary tables of docs/pallas-parity.md from its case rows.

Each row of a `### `file`` section's table is `| test | status | port |`; its status starts with
one of the four words the page defines. Prints the two Summary tables (rows per status, and per
file) and the features the pending rows need, in the page's format; with --write it replaces
them in the page.
"""
import re
import sys
from pathlib import Path

PAGE = Path(__file__).resolve().parent.parent / "docs" / "pallas-parity.md"
KINDS = ["passes", "deliberately different", "pending", "not applicable"]


def count(text):
    per_file = {}
    current = None
    for line in text.splitlines():
        m = re.match(r"### `([^`]+\.py)`", line)
        if m:
            current = m.group(1)
            per_file.setdefault(current, dict.fromkeys(KINDS, 0))
            continue
        if current is None or not line.startswith("| `"):
            continue
        status = line.split("|")[2].strip()
        for kind in KINDS:
            if status.startswith(kind):
                per_file[current][kind] += 1
                break
    return per_file


def tables(per_file):
    total = {k: sum(f[k] for f in per_file.values()) for k in KINDS}
    in_scope = total["passes"] + total["deliberately different"] + total["pending"]
    out = ["| Rows (test families) | Count |", "|---|---|", f"| in scope | {in_scope} |",
           f"| passes | {total['passes']} |",
           f"| deliberately different | {total['deliberately different']} |",
           f"| pending (needs a feature) | {total['pending']} |",
           f"| not applicable | {total['not applicable']} |", "",
           "| File | passes | deliberately different | pending | not applicable |",
           "|---|---|---|---|---|"]
    for name, c in per_file.items():
        out.append(f"| `{name}` | " + " | ".join(str(c[k]) for k in KINDS) + " |")
    return "\n".join(out)


def split_needs(status):
    """The features a "pending: needs A, B (why)" status names, split at top-level commas."""
    if not status.startswith("pending: needs "):
        return [status[len("pending: "):].strip() or "unspecified"]
    text, parts, depth, cur = status[len("pending: needs "):], [], 0, ""
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    parts.append(cur.strip())
    return parts


def features(text):
    rows = {}
    for line in text.splitlines():
        if line.startswith("| `"):
            status = line.split("|")[2].strip()
            if status.startswith("pending"):
                for f in split_needs(status):
                    rows[f] = rows.get(f, 0) + 1
    out = ["| Feature | Rows |", "|---|---|"]
    for f, n in sorted(rows.items(), key=lambda kv: (-kv[1], kv[0])):
        out.append(f"| {f} | {n} |")
    return "\n".join(out)


def main():
    text = PAGE.read_text()
    new = tables(count(text))
    if "--write" in sys.argv:
        pattern = re.compile(r"\| Rows \(test families\) \| Count \|[^\n]*\n(?:\|[^\n]*\n)*\n\| File \|[^\n]*\n(?:\|[^\n]*\n)*")
        text, n = pattern.subn(new + "\n", text, count=1)
        if n != 1:
            sys.exit("parity_summary.py: the Summary tables were not found")
        feats = features(text)
        pattern = re.compile(r"\| Feature \| Rows \|\n(?:\|[^\n]*\n)*")
        text, n = pattern.subn(feats + "\n", text, count=1)
        if n != 1:
            sys.exit("parity_summary.py: the features table was not found")
        PAGE.write_text(text)
    print(new)
    print()
    print(features(text))


if __name__ == "__main__":
    main()
