"""The Python reason table against the Go one: every reason word latch's Go package knows
(refusal.go's reasonKinds, with the words of the policy and authority packages it names) must be
in latch.REASON_KINDS with the same kind, and every kind must have its exception class. A word
added to Go and not here fails this test."""

from __future__ import annotations

import glob
import os
import re
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))

import latch  # noqa: E402


def go_reason_kinds() -> dict:
    """go_reason_kinds reads the reason → kind table out of the Go sources."""
    with open(os.path.join(REPO, "refusal.go")) as f:
        src = f.read()
    kinds = dict(re.findall(r'^\s*(Kind\w+)\s+RefusalKind\s*=\s*"([a-z_]+)"', src, re.M))
    words = {}
    for name, word, pkg, ref in re.findall(
            r'^\s*(Reason\w+)\s+Reason\s*=\s*(?:"([a-z_]+)"|(policy|authority)\.(\w+))', src, re.M):
        if word:
            words[name] = word
            continue
        for path in glob.glob(os.path.join(REPO, pkg, "*.go")):
            if path.endswith("_test.go"):
                continue
            with open(path) as f:
                m = re.search(r'\b%s\s*=\s*"([a-z_]+)"' % re.escape(ref), f.read())
            if m:
                words[name] = m.group(1)
                break
        else:
            raise AssertionError("%s = %s.%s: no such constant in %s/" % (name, pkg, ref, pkg))
    block = re.search(r'var reasonKinds = map\[Reason\]RefusalKind\{(.*?)\n\}', src, re.S)
    if block is None:
        raise AssertionError("refusal.go has no reasonKinds table")
    table = {}
    for reason, kind in re.findall(r'(Reason\w+):\s*(Kind\w+)', block.group(1)):
        table[words[reason]] = kinds[kind]
    return table


class VocabularyTest(unittest.TestCase):
    def test_every_go_reason_has_its_kind_here(self) -> None:
        table = go_reason_kinds()
        self.assertGreater(len(table), 60, "read too few reasons out of refusal.go: %r" % table)
        missing = sorted(set(table) - set(latch.REASON_KINDS))
        extra = sorted(set(latch.REASON_KINDS) - set(table))
        wrong = sorted(r for r in table if r in latch.REASON_KINDS and latch.REASON_KINDS[r] != table[r])
        self.assertEqual((missing, extra, wrong), ([], [], []),
                         "REASON_KINDS differs from refusal.go: (missing, extra, other kind)")

    def test_every_kind_has_a_class(self) -> None:
        for reason, kind in go_reason_kinds().items():
            cls = latch.refusal_class(reason)
            self.assertIsNotNone(cls, reason)
            self.assertEqual(cls.kind, kind, reason)
            self.assertTrue(issubclass(cls, latch.Refusal))

    def test_a_problem_reads_as_its_kind(self) -> None:
        doc = {"type": "urn:latch:problem:committed", "status": 409, "reason": "committed",
               "kind": "committed", "effect_key": "charge:inv_88", "state": "committed",
               "attempt": 1, "result": {"charge": "ch_1"}, "detail": "already committed"}
        err = latch.error_of(409, doc)
        self.assertIsInstance(err, latch.Committed)
        self.assertEqual((err.result, err.effect_key, err.attempt), ({"charge": "ch_1"}, "charge:inv_88", 1))
        # A word this table does not know is read by the kind the server sent.
        later = latch.error_of(403, {"type": "urn:latch:problem:budget_frozen", "reason": "budget_frozen", "kind": "denied"})
        self.assertIsInstance(later, latch.Denied)
        self.assertEqual(later.reason, "budget_frozen")
        # A problem with no kind is no refusal of the pipeline.
        p = latch.error_of(400, {"type": "urn:latch:problem:unknown_field", "reason": "unknown_field", "pointer": "/ACTION"})
        self.assertIsInstance(p, latch.ProblemError)
        self.assertNotIsInstance(p, latch.Refusal)
        self.assertEqual(p.pointer, "/ACTION")

    def test_every_kind_reads_for_a_model(self) -> None:
        for kind, cls in latch.KIND_CLASSES.items():
            reason = next(r for r, k in latch.REASON_KINDS.items() if k == kind)
            text = cls(reason, "", 0, {"effect_key": "charge:inv_88", "approval_id": "apr_1",
                                       "result": {"charge": "ch_1"}}).for_model()
            self.assertIn(reason, text)
            self.assertNotIn("{", text.split("Its stored result")[0], "an unfilled placeholder: " + text)
            self.assertNotIn("Do not retry this call.", text, "kind %s has no advice" % kind)
        dup = latch.Committed("committed", "", 409, {"effect_key": "k", "result": {"charge": "ch_1"}}).for_model()
        self.assertIn('{"charge": "ch_1"}', dup)
        self.assertIn("apr_9", latch.ApprovalRequired(problem={"approval_id": "apr_9"}).for_model())


if __name__ == "__main__":
    unittest.main()
