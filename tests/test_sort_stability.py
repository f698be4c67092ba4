"""No result of the library hangs on an unstable sort: a test over ``lib/``'s source.

numpy's default sort (``kind="quicksort"``) dispatches to SIMD kernels (AVX2, AVX-512) whose order of equal
keys differs from the scalar path, so equal keys come out in another order on another CPU. pandas' sorts and
``value_counts`` go through it. Every ``sort_values``, ``sort_index``, ``argsort`` and ``np.sort`` in the
library therefore names its ``kind`` (``"stable"``: equal keys keep their input order), and every
``value_counts`` that orders by count says how ties go (``sort=False``, a ``sort_index`` after it, or
:func:`dlcluster.ordering.counts_desc`). The only exception is a call with a comment ``# no ties: <why>`` on
its line or the line above it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "lib" / "dlcluster"
SORTS = {"sort_values", "sort_index", "argsort"}
EXCUSE = "# no ties:"


def unstable_calls(source: str, filename: str = "<source>") -> list[tuple[int, str]]:
    """(line, text) of each sort without ``kind`` and each count-ordered ``value_counts`` without a tie rule."""
    tree = ast.parse(source, filename)
    lines = source.splitlines()
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        name, keywords = node.func.attr, {k.arg for k in node.keywords}
        if name in SORTS or (name == "sort" and isinstance(node.func.value, ast.Name) and node.func.value.id == "np"):
            bad = "kind" not in keywords
        elif name == "value_counts":
            parent = parents.get(node)
            chained = (isinstance(parent, ast.Attribute) and parent.attr == "sort_index")
            bad = "sort" not in keywords and not chained
        else:
            continue
        around = lines[max(0, node.lineno - 2): node.end_lineno]
        if bad and not any(EXCUSE in line for line in around):
            found.append((node.lineno, lines[node.lineno - 1].strip()))
    return found


def test_the_check_finds_what_it_should():
    source = "\n".join([
        "a = df.sort_values('x')",                       # 1: no kind
        "b = df.sort_values('x', kind='stable')",        # 2: fine
        "c = np.argsort(v)",                             # 3: no kind
        "d = np.sort(v, kind='stable')",                 # 4: fine
        "e = s.value_counts()",                          # 5: orders by count, ties open
        "f = s.value_counts().sort_index(kind='stable')",  # 6: fine
        "g = s.value_counts(sort=False)",                # 7: fine
        "# no ties: the index is unique",                # 8
        "h = s.sort_index()",                            # 9: excused by the line above
        "i = sorted(v)",                                 # 10: Python's sort is stable
        "j = v.sort()",                                  # 11: a list's sort is stable
    ])
    assert [line for line, _ in unstable_calls(source)] == [1, 3, 5]


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_unstable_sort_in_the_library(path):
    found = unstable_calls(path.read_text(), str(path))
    assert not found, (f"{path.relative_to(PACKAGE.parent.parent)}: sorts whose tie order depends on the CPU "
                       f"(add kind='stable' and a secondary key, or '{EXCUSE} <why>'): {found}")
