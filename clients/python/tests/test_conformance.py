"""The adapter conformance table the Go adapters replay (latchtest/refusals.json, read from the
repository, not copied) replayed through this client against a real latch serve started with
the table's policy, acting as the table's principal: every case once through ``@latch.protect``
(refusals read from the exception it raises), and once as a tool would hand it to a model
(``duplicate="return"``, refusals read back from ``for_model()``'s text). A handler whose
argument ``mode`` says what it does (succeed, lose_reply, not_executed) counts its runs; each
step's outcome is compared with the table's expectation: whether the handler ran, the refusal's
kind and reason word, its effect key, its approval request, and a duplicate's stored result."""

from __future__ import annotations

import json
import os
import re
import sys
import unittest
from typing import Any, Callable, Dict, List, Optional

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import latch  # noqa: E402
from harness import REPO, Serve  # noqa: E402

with open(os.path.join(REPO, "latchtest", "refusals.json"), encoding="utf-8") as _f:
    TABLE = json.load(_f)

# The fields this replay understands: a field the table gains must be understood here before
# the table passes, never silently ignored.
STEP_FIELDS = {"call", "approve", "expect"}
CALL_FIELDS = {"action", "id", "amount", "mode"}
EXPECT_FIELDS = {"ran", "kind", "reason", "effect_key", "approval", "other_approval_than", "result_of"}

# The exception class this client raises for each kind the table names. Spelled out here, not
# read from the client's own table, so a kind mapped to the wrong class fails.
CLASS_OF_KIND = {
    "denied": "Denied", "approval_required": "ApprovalRequired", "committed": "Committed",
    "ambiguous": "Ambiguous", "outcome_unknown": "OutcomeUnknown",
    "not_executed": "NotExecutedRefusal", "attempts_exhausted": "AttemptsExhausted",
    "key_conflict": "KeyConflict",
}


class LostReply(Exception):
    """LostReply is what the handler raises in mode lose_reply, after acting: not NotExecuted."""


class Outcome:
    """Outcome is what the client surfaced for one call: ``result`` on success, ``refusal``
    (kind, reason, effect_key, approval_id, result; absent keys are not surfaced) for a
    refusal, or ``err`` for an error carrying no latch word (only not_executed: the handler's
    own NotExecuted)."""

    def __init__(self, result: Any = None, refusal: Optional[Dict[str, Any]] = None,
                 err: Optional[BaseException] = None):
        self.result = result
        self.refusal = refusal
        self.err = err

    def __repr__(self) -> str:
        if self.refusal is not None:
            return "refused %s (%s)" % (self.refusal.get("reason"), self.refusal.get("kind"))
        if self.err is not None:
            return "error %r" % self.err
        return "success %r" % (self.result,)


class Kit:
    """Kit is the work of every call: it does what the call's mode says and counts its runs."""

    def __init__(self) -> None:
        self.runs: Dict[str, int] = {}
        self.raised: List[BaseException] = []

    def count(self, call: Dict[str, Any]) -> int:
        return self.runs.get(call["action"] + "\x00" + call["id"], 0)

    def handler(self, action: str) -> Callable[..., Any]:
        def work(id: str, amount: int, mode: str) -> Dict[str, Any]:  # noqa: A002 - the table's argument
            k = action + "\x00" + id
            self.runs[k] = self.runs.get(k, 0) + 1
            err: Optional[BaseException] = None
            if mode == "lose_reply":
                err = LostReply("connection reset after the effect (a lost reply)")
            elif mode == "not_executed":
                err = latch.NotExecuted("the payment provider refused before acting")
            if err is not None:
                self.raised.append(err)
                raise err
            return {"id": id, "amount": amount, "run": self.runs[k]}
        return work


def read_for_model(text: str) -> Dict[str, Any]:
    """read_for_model reads back what a model is handed for a refusal: "latch refused the call:
    REASON (KIND). advice[ (request ID)| effect KEY]…[ Its stored result: JSON]"."""
    m = re.match(r"^latch refused the call: (\w+) \((\w+)\)\. (.*)$", text, re.S)
    if m is None:
        raise AssertionError("the model reads %r: not a latch refusal" % text)
    rest = m.group(3)
    out: Dict[str, Any] = {"reason": m.group(1), "kind": m.group(2)}
    stored = rest.find(" Its stored result: ")
    if stored >= 0:
        out["result"] = json.loads(rest[stored + len(" Its stored result: "):])
        rest = rest[:stored]
    apr = re.search(r"\(request ([^\s)]+)\)", rest)
    if apr:
        out["approval_id"] = apr.group(1)
    eff = re.search(r"\beffect ([^\s);,]+)", rest)
    if eff:
        out["effect_key"] = eff.group(1).rstrip(".")
    return out


class Replay:
    """Replay runs the table's cases on one latch serve, each call made by ``invoke``."""

    name = ""

    @classmethod
    def setUpClass(cls) -> None:
        cls.serve = Serve(policy=TABLE["policy"], agent=TABLE["principal"], approver=TABLE["approver"])
        cls.agent = latch.Client(cls.serve.url, cls.serve.agent_token, timeout=15)
        cls.person = latch.Client(cls.serve.url, cls.serve.approver_token, timeout=15)
        cls.kit = Kit()
        cls.functions: Dict[str, Callable[..., Any]] = {}

    @classmethod
    def tearDownClass(cls) -> None:
        cls.serve.stop()

    def invoke(self, call: Dict[str, Any]) -> Outcome:
        raise NotImplementedError

    def test_every_case_of_the_table(self) -> None:
        self.assertEqual(TABLE["schema"], "latch.conformance/v1")
        self.assertGreaterEqual(len(TABLE["cases"]), 8)
        for case in TABLE["cases"]:
            with self.subTest(case=case["name"]):
                self.run_case(case)

    def run_case(self, case: Dict[str, Any]) -> None:
        outs: List[Optional[Outcome]] = []
        for i, step in enumerate(case["steps"]):
            at = "case %s (%s) step %d" % (case["name"], case["about"], i)
            self.assertLessEqual(set(step), STEP_FIELDS, "%s: a field unknown to this replay" % at)
            if "approve" in step:
                prev = outs[step["approve"]]
                apr = prev.refusal.get("approval_id") if prev and prev.refusal else None
                self.assertTrue(apr, "%s: step %d named no approval request to grant" % (at, step["approve"]))
                self.assertEqual(self.person.approve(apr)["status"], "granted", "%s: approve %s" % (at, apr))
                outs.append(None)
                continue
            call, expect = step["call"], step["expect"]
            self.assertLessEqual(set(call), CALL_FIELDS, "%s: a call field unknown to this replay" % at)
            self.assertLessEqual(set(expect), EXPECT_FIELDS, "%s: an expect field unknown to this replay" % at)
            before = self.kit.count(call)
            out = self.invoke(call)
            outs.append(out)
            at += " (%s %s amount %d, %s)" % (call["action"], call["id"], call["amount"], call["mode"])
            self.check(at, expect, out, outs, self.kit.count(call) - before)

    def check(self, at: str, e: Dict[str, Any], out: Outcome, outs: List[Optional[Outcome]], ran: int) -> None:
        """check compares one step's outcome with its expectation, as latchtest does in Go."""
        self.assertIn(ran, (0, 1), "%s: the handler ran %d times in one attempt" % (at, ran))
        self.assertEqual(ran == 1, e["ran"], "%s: the handler ran = %s, want %s (outcome %r)" % (at, ran == 1, e["ran"], out))
        kind = e.get("kind")
        if not kind:
            self.assertTrue(out.refusal is None and out.err is None, "%s: outcome %r, want success" % (at, out))
            return
        r = out.refusal
        if kind == "committed" and r is None and out.err is None:
            pass  # a duplicate handed back as success: its stored result, compared below
        elif kind == "not_executed" and r is None and out.err is not None:
            # The handler's own error, raised as it was: not_executed is no refusal.
            self.assertTrue(any(out.err is x for x in self.kit.raised), "%s: %r is not the handler's own error" % (at, out.err))
            return
        else:
            self.assertIsNotNone(r, "%s: outcome %r, want the refusal %s (%s)" % (at, out, e["reason"], kind))
            assert r is not None
            self.assertEqual("%s (%s)" % (r["reason"], r["kind"]), "%s (%s)" % (e["reason"], kind),
                             "%s: surfaced reason (kind)" % at)
            if e.get("effect_key") and "effect_key" in r:
                self.assertEqual(r["effect_key"], e["effect_key"], "%s: surfaced effect key" % at)
            if e.get("approval"):
                self.assertTrue(r.get("approval_id"), "%s: surfaced no approval id: a person cannot find the request" % at)
            if "other_approval_than" in e:
                prev = outs[e["other_approval_than"]]
                self.assertNotEqual(r.get("approval_id"), prev.refusal.get("approval_id") if prev and prev.refusal else None,
                                    "%s: surfaced the approval granted for other arguments (step %d)" % (at, e["other_approval_than"]))
        if "result_of" in e:
            want = outs[e["result_of"]]
            self.assertIsNotNone(want and want.result, "%s: step %d handed back no result" % (at, e["result_of"]))
            got = r.get("result") if r is not None else out.result
            self.assertEqual(got, want.result if want else None, "%s: the stored result of step %d" % (at, e["result_of"]))


class ProtectConformanceTest(Replay, unittest.TestCase):
    """Each call through @latch.protect: a refusal is the exception it raises, read from its
    attributes, its class checked against its kind."""

    def invoke(self, call: Dict[str, Any]) -> Outcome:
        fn = self.functions.get(call["action"])
        if fn is None:
            fn = latch.protect(call["action"], client=self.agent)(self.kit.handler(call["action"]))
            self.functions[call["action"]] = fn
        try:
            return Outcome(result=fn(id=call["id"], amount=call["amount"], mode=call["mode"]))
        except latch.Refusal as err:
            want = CLASS_OF_KIND.get(err.kind)
            self.assertIsNotNone(want, "kind %s: add its class to CLASS_OF_KIND" % err.kind)
            self.assertEqual(type(err).__name__, want, "a %s refusal (%s) raised as %s" % (err.kind, err.reason, type(err).__name__))
            return Outcome(refusal={"kind": err.kind, "reason": err.reason, "effect_key": err.effect_key,
                                    "approval_id": err.approval_id, "result": err.result})
        except latch.LatchError:
            raise
        except Exception as err:  # the handler's own error, re-raised by protect
            return Outcome(err=err)


class ForModelConformanceTest(Replay, unittest.TestCase):
    """Each call as a tool hands it to a model: @latch.protect(duplicate="return"), a refusal
    read back from the text for_model() gives it (its effect key and approval request where
    that text names them)."""

    def invoke(self, call: Dict[str, Any]) -> Outcome:
        fn = self.functions.get(call["action"])
        if fn is None:
            fn = latch.protect(call["action"], client=self.agent, duplicate="return")(self.kit.handler(call["action"]))
            self.functions[call["action"]] = fn
        try:
            return Outcome(result=fn(id=call["id"], amount=call["amount"], mode=call["mode"]))
        except latch.Refusal as err:
            return Outcome(refusal=read_for_model(err.for_model()))
        except latch.LatchError:
            raise
        except Exception as err:
            return Outcome(err=err)


if __name__ == "__main__":
    unittest.main()
