"""The Python pages of docs/integrations hold code a reader copies: every python block must
compile, every ``latch.`` name it uses must exist in the package, each page's table of what the
model reads must be ``for_model()``'s own words, and each test a page names as proof must exist.
No server is needed."""

from __future__ import annotations

import ast
import os
import re
import sys
import unittest
from typing import List, Tuple

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import latch  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
PAGES = ["python.md", "openai-agents-python.md", "langgraph-python.md"]
RECIPES = ["openai-agents-python.md", "langgraph-python.md"]


def page(name: str) -> str:
    with open(os.path.join(REPO, "docs", "integrations", name), encoding="utf-8") as f:
        return f.read()


def blocks(text: str, lang: str) -> List[Tuple[int, str]]:
    """blocks returns the fenced code blocks of lang in text, each with the line it starts on."""
    out = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```" + lang:
            j = i + 1
            while j < len(lines) and lines[j].strip() != "```":
                j += 1
            out.append((i + 2, "\n".join(lines[i + 1:j])))
            i = j
        i += 1
    return out


def latch_names(tree: ast.AST) -> List[Tuple[int, str]]:
    """latch_names lists each name the code reads from the package: latch.NAME and
    ``from latch import NAME``."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "latch":
            out.append((node.lineno, node.attr))
        if isinstance(node, ast.ImportFrom) and node.module == "latch":
            out.extend((node.lineno, a.name) for a in node.names)
    return out


class DocsTest(unittest.TestCase):

    def test_the_pages_code_compiles_and_names_what_latch_has(self) -> None:
        for name in PAGES:
            code = blocks(page(name), "python")
            self.assertTrue(code, "%s: no python block" % name)
            for line, src in code:
                where = "docs/integrations/%s:%d" % (name, line)
                tree = compile(src, where, "exec", ast.PyCF_ONLY_AST)
                compile(tree, where, "exec")
                for at, attr in latch_names(tree):
                    self.assertTrue(hasattr(latch, attr), "docs/integrations/%s:%d: latch has no %s" % (name, line + at - 1, attr))
        for name in RECIPES:
            uses = [n for _, src in blocks(page(name), "python") for _, n in latch_names(ast.parse(src))]
            self.assertIn("protect", uses, "%s: the recipe does not wrap its call" % name)

    def test_the_tables_are_for_models_words(self) -> None:
        for name in RECIPES:
            text = page(name)
            section = text[text.index("## What the model reads"):]
            rows = dict(re.findall(r"^\| `([a-z_]+)` \| (.+) \|$", section, re.M))
            self.assertEqual(sorted(rows), sorted(latch.KIND_CLASSES), "%s: the table's kinds" % name)
            for kind, advice in rows.items():
                reason = next(r for r, k in latch.REASON_KINDS.items() if k == kind)
                err = latch.KIND_CLASSES[kind](reason, "", 409, {"effect_key": "refund:inv_88", "approval_id": "apr_…"})
                self.assertEqual(err.for_model(), "latch refused the call: %s (%s). %s" % (reason, kind, advice),
                                 "%s: %s" % (name, kind))

    def test_each_test_a_page_names_exists(self) -> None:
        for name in PAGES:
            refs = re.findall(r"`(clients/[^`\s]+)` › `([^`]+)`", page(name))
            if name in RECIPES:
                self.assertGreaterEqual(len(refs), 5, "%s names %d tests" % (name, len(refs)))
            for path, want in refs:
                full = os.path.join(REPO, path)
                self.assertTrue(os.path.exists(full), "%s: no file %s" % (name, path))
                with open(full, encoding="utf-8") as f:
                    src = f.read()
                if path.endswith(".py"):
                    names = re.findall(r"def (test_\w+)\(", src)
                else:
                    names = [re.sub(r"\\(.)", r"\1", m[1]) for m in re.findall(r"\btest\((['\"])((?:\\.|(?!\1).)*)\1", src)]
                self.assertIn(want, names, "%s: %s has no test %r" % (name, path, want))


if __name__ == "__main__":
    unittest.main()
