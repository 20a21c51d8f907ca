"""Count the hand rules in ``src/sleuth/agents/`` and ``src/sleuth/retrieval/``.

Two counts, per file and in total, read from the syntax tree (never from the text, so
comments and docstrings do not count):

- **regex literals**: string arguments of ``re.compile``, ``re.search``, ``re.match``,
  ``re.fullmatch``, ``re.findall``, ``re.finditer``, ``re.sub``, ``re.split`` (an f-string
  counts as one literal);
- **word-list strings**: string constants inside a module-level ``list``, ``tuple``, ``set``,
  ``frozenset(...)`` or ``dict`` literal (keys and values), i.e. the word lists rules read
  (``__all__`` excluded).

    python bench/count_rules.py            # totals and the ten largest files
    python bench/count_rules.py --files    # every file
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FOLDERS = (REPO / "src" / "sleuth" / "agents", REPO / "src" / "sleuth" / "retrieval")
RE_FUNCTIONS = {"compile", "search", "match", "fullmatch", "findall", "finditer", "sub", "split"}


def _is_string(node: ast.AST) -> bool:
    return (isinstance(node, ast.Constant) and isinstance(node.value, str)) or isinstance(
        node, ast.JoinedStr
    )


def regex_literals(tree: ast.AST) -> int:
    """String (or f-string) first arguments of ``re.<function>(...)`` calls."""
    count = 0
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "re"
            and node.func.attr in RE_FUNCTIONS
            and node.args
        ):
            first = node.args[0]
            # adjacent literals joined by + or implicit concatenation count once
            if _is_string(first) or isinstance(first, ast.BinOp):
                count += 1
    return count


def _collection_strings(node: ast.AST) -> int:
    if isinstance(node, ast.BinOp):  # frozenset(LIB) | frozenset([...]): both sides
        return _collection_strings(node.left) + _collection_strings(node.right)
    if isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("frozenset", "set"):
        return sum(_collection_strings(arg) for arg in node.args)
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return sum(1 if _is_string(e) else _collection_strings(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        items = [*(k for k in node.keys if k is not None), *node.values]
        return sum(1 if _is_string(e) else _collection_strings(e) for e in items)
    return 0


def word_list_strings(tree: ast.Module) -> int:
    """String constants in module-level collection literals."""
    count = 0
    for node in tree.body:
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if any(getattr(t, "id", "") == "__all__" for t in targets):
            continue  # the export list is not a rule
        if value is not None:
            count += _collection_strings(value)
    return count


def count(path: Path) -> tuple[int, int]:
    """``(regex literals, word-list strings)`` of one Python file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return regex_literals(tree), word_list_strings(tree)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", action="store_true", help="list every file")
    args = parser.parse_args()
    rows = []
    for folder in FOLDERS:
        for path in sorted(folder.rglob("*.py")):
            rows.append((path.relative_to(REPO), *count(path)))
    regex_total = sum(r[1] for r in rows)
    words_total = sum(r[2] for r in rows)
    print(f"regex literals    : {regex_total}")
    print(f"word-list strings : {words_total}")
    shown = rows if args.files else sorted(rows, key=lambda r: -(r[1] + r[2]))[:10]
    print("\n| file | regex literals | word-list strings |\n|---|---|---|")
    for name, regexes, words in shown:
        print(f"| `{name}` | {regexes} | {words} |")


if __name__ == "__main__":
    main()
