#!/usr/bin/env python3
"""Apply one hypothesis file (experiments/*.toml) to a working tree, for scripts/demo.sh.

The format is documented in experiments/README.md: `message`,
optional `tags`, and one or more `[[edit]]` tables of literal `find` / `replace` edits.
Every `find` must occur exactly once in its file (after the experiment's earlier edits);
otherwise nothing at all is written, so a hypothesis never half-applies.

    apply-experiment.py FILE.toml [--root DIR]   apply it to the tree at DIR (default .)
    apply-experiment.py FILE.toml --message      print its message and exit

Exit status: 0 applied, 2 malformed file, 3 does not apply to this tree.
"""

import argparse
import os
import sys

try:
    import tomllib
except ImportError:  # Python < 3.11
    try:
        import tomli as tomllib
    except ImportError:
        sys.exit("apply-experiment.py: needs Python 3.11+ (tomllib) or the tomli package")

TOP_KEYS = {"message", "tags", "edit"}
EDIT_KEYS = {"file", "find", "replace"}


class Malformed(Exception):
    pass


class DoesNotApply(Exception):
    pass


def load(path):
    """Parse and validate a hypothesis file; return (message, tags, edits)."""
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise Malformed(str(e)) from None
    unknown = set(doc) - TOP_KEYS
    if unknown:
        raise Malformed(f"unknown keys {sorted(unknown)} (allowed: {sorted(TOP_KEYS)})")
    message = doc.get("message")
    if not isinstance(message, str) or not message.strip():
        raise Malformed("`message` must be a non-empty string")
    tags = doc.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise Malformed("`tags` must be a list of strings")
    edits = doc.get("edit")
    if not isinstance(edits, list) or not edits:
        raise Malformed("at least one [[edit]] table is needed")
    for i, edit in enumerate(edits, 1):
        unknown = set(edit) - EDIT_KEYS
        missing = EDIT_KEYS - set(edit)
        if unknown or missing:
            raise Malformed(f"[[edit]] #{i}: needs exactly {sorted(EDIT_KEYS)}")
        if not all(isinstance(edit[k], str) for k in EDIT_KEYS) or not edit["find"]:
            raise Malformed(f"[[edit]] #{i}: file, find and replace must be strings, find non-empty")
        parts = edit["file"].replace("\\", "/").split("/")
        if os.path.isabs(edit["file"]) or ".." in parts:
            raise Malformed(f"[[edit]] #{i}: file {edit['file']!r} must be a path inside the repo")
    return message.strip(), tags, edits


def apply(edits, root):
    """Apply all edits in memory, then write; DoesNotApply leaves every file untouched."""
    contents = {}
    for i, edit in enumerate(edits, 1):
        path = os.path.join(root, edit["file"])
        if path not in contents:
            try:
                with open(path, encoding="utf-8", newline="") as f:
                    contents[path] = f.read()
            except OSError as e:
                raise DoesNotApply(f"[[edit]] #{i}: cannot read {edit['file']}: {e.strerror}") from None
        n = contents[path].count(edit["find"])
        if n != 1:
            where = "not found" if n == 0 else f"found {n} times"
            raise DoesNotApply(f"[[edit]] #{i}: `find` {where} in {edit['file']}: {edit['find']!r}")
        contents[path] = contents[path].replace(edit["find"], edit["replace"])
    for path, text in contents.items():
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write(text)
    return sorted(os.path.relpath(p, root) for p in contents)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("experiment")
    ap.add_argument("--root", default=".")
    ap.add_argument("--message", action="store_true", help="print the message only")
    args = ap.parse_args(argv)
    name = os.path.basename(args.experiment)
    try:
        message, _, edits = load(args.experiment)
        if args.message:
            print(message)
            return 0
        changed = apply(edits, args.root)
    except Malformed as e:
        print(f"apply-experiment.py: {name} is malformed: {e}", file=sys.stderr)
        return 2
    except DoesNotApply as e:
        print(f"apply-experiment.py: {name} does not apply: {e}", file=sys.stderr)
        return 3
    print(f"applied {name}: {', '.join(changed)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
