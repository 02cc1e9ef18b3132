"""The interrupt contract against a real latch serve: ``@latch.protect(..., interrupter=Poller)``
waits while a person approves with ``latch approve`` and then runs once; a person's denial stops
it approval_denied without running; ``check`` reads waiting, resume, denied (also for the
attempt that asks again after a denial) and expired for a request, and waiting then resume for
an unknown outcome."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import latch  # noqa: E402
from latch.interrupt import Answer, Poller, check, interruptible  # noqa: E402
from harness import Serve  # noqa: E402

POLICY = """\
schema: latch.policy/v1
actions:
  billing.charge:
    effect: "charge:{invoice_id}"
    rules:
      - when: { amount_lte: 50000 }
        decision: allow
      - decision: approve
  billing.quick:
    effect: "quick:{invoice_id}"
    approval_ttl: 1s
    decision: approve
"""


class InterruptTest(unittest.TestCase):
    serve: Serve

    @classmethod
    def setUpClass(cls) -> None:
        cls.serve = Serve(policy=POLICY)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.serve.stop()

    def setUp(self) -> None:
        self.agent = latch.Client(self.serve.url, self.serve.agent_token, timeout=15)
        self.person = latch.Client(self.serve.url, self.serve.approver_token, timeout=15)

    def invoice(self) -> str:
        return "inv_%s_%d" % (self.id().rsplit(".", 1)[-1], time.monotonic_ns())

    def pending_for(self, invoice: str) -> str:
        for _ in range(400):
            for a in self.person.approvals("pending"):
                if a["arguments"].get("invoice_id") == invoice:
                    return a["approval_id"]
            time.sleep(0.025)
        self.fail("no pending request for %s" % invoice)

    def asked(self, action: str, invoice: str, amount: int) -> latch.ApprovalRequired:
        with self.assertRaises(latch.ApprovalRequired) as cm:
            self.agent.begin(action, {"invoice_id": invoice, "amount": amount})
        return cm.exception

    def run_in_thread(self, fn, *args):
        out: dict = {}

        def run() -> None:
            try:
                out["value"] = fn(*args)
            except BaseException as err:  # handed to the test thread
                out["error"] = err

        t = threading.Thread(target=run)
        t.start()
        return t, out

    def test_poller_waits_while_a_person_approves_then_runs_once(self) -> None:
        runs = []

        @latch.protect("billing.charge", client=self.agent, interrupter=Poller(self.agent, every=0.05, timeout=20))
        def charge(invoice_id: str, amount: int) -> dict:
            runs.append(latch.current().approval_id)
            return {"charged": amount}

        inv = self.invoice()
        t, out = self.run_in_thread(charge, inv, 90000)
        aid = self.pending_for(inv)
        self.assertEqual(runs, [], "ran before the approval")
        self.serve.cli("approve", aid, "--as", "alice")
        t.join(30)
        self.assertNotIn("error", out)
        self.assertEqual(out["value"], {"charged": 90000})
        self.assertEqual(runs, [aid], "the resumed call spent the granted request, once")
        self.assertEqual(self.person.effect("charge:" + inv)["state"], "committed")
        self.assertEqual(self.person.approval(aid)["status"], "consumed")

    def test_async_function_waits_too(self) -> None:
        runs = []

        @latch.protect("billing.charge", client=self.agent, interrupter=Poller(self.agent, every=0.05, timeout=20))
        async def charge(invoice_id: str, amount: int) -> dict:
            runs.append(amount)
            return {"charged": amount}

        inv = self.invoice()
        t, out = self.run_in_thread(lambda: asyncio.run(charge(inv, 90001)))
        self.serve.cli("approve", self.pending_for(inv), "--as", "alice")
        t.join(30)
        self.assertEqual(out.get("value"), {"charged": 90001}, out.get("error"))
        self.assertEqual(runs, [90001])

    def test_a_denial_stops_approval_denied_and_never_runs(self) -> None:
        runs = []

        @latch.protect("billing.charge", client=self.agent, interrupter=Poller(self.agent, every=0.05, timeout=20))
        def charge(invoice_id: str, amount: int) -> None:
            runs.append(amount)

        inv = self.invoice()
        t, out = self.run_in_thread(charge, inv, 90000)
        aid = self.pending_for(inv)
        self.serve.cli("deny", aid, "--as", "alice")
        t.join(30)
        err = out.get("error")
        self.assertIsInstance(err, latch.ApprovalRefused)
        self.assertEqual(err.reason, "approval_denied")
        self.assertEqual(err.approval_id, aid)
        self.assertEqual(err.effect_key, "charge:" + inv)
        self.assertEqual(runs, [])
        # The attempt after the denial asks again; its wait ends denied at once, naming both.
        with self.assertRaises(latch.ApprovalRefused) as again:
            charge(inv, 90000)
        self.assertEqual(again.exception.reason, "approval_denied")
        self.assertEqual(again.exception.approval_id, aid)
        self.assertEqual(runs, [])
        asked = self.asked("billing.charge", inv, 90000)
        ans = check(self.agent, asked)
        self.assertEqual((ans.status, ans.approval_id, ans.by), ("denied", aid, "alice"))
        self.assertTrue(ans.pending and ans.pending != aid, ans)

    def test_poller_gives_up_at_its_timeout(self) -> None:
        asked = self.asked("billing.charge", self.invoice(), 90000)
        start = time.monotonic()
        with self.assertRaises(TimeoutError):
            Poller(self.agent, every=0.02, timeout=0.2).interrupt(asked)
        self.assertLess(time.monotonic() - start, 5)
        self.assertEqual(check(self.agent, asked).status, "waiting")

    def test_check_reads_waiting_resume_denied(self) -> None:
        inv = self.invoice()
        asked = self.asked("billing.charge", inv, 90000)
        self.assertTrue(interruptible(asked))
        self.assertEqual(check(self.agent, asked), Answer("waiting", asked.approval_id, "charge:" + inv))
        self.serve.cli("approve", asked.approval_id, "--as", "alice")
        self.assertEqual(check(self.agent, asked), Answer("resume", asked.approval_id, "charge:" + inv, "alice"))
        self.assertIsNone(Answer("resume").refusal())

        inv2 = self.invoice()
        asked2 = self.asked("billing.charge", inv2, 90000)
        self.serve.cli("deny", asked2.approval_id, "--as", "alice")
        ans = check(self.agent, asked2)
        self.assertEqual(ans, Answer("denied", asked2.approval_id, "charge:" + inv2, "alice"))
        self.assertEqual(ans.refusal().reason, "approval_denied")

    def test_check_reads_expired(self) -> None:
        asked = self.asked("billing.quick", self.invoice(), 1)
        self.assertEqual(check(self.agent, asked).status, "waiting")
        time.sleep(1.3)
        ans = check(self.agent, asked)
        self.assertEqual(ans.status, "expired")
        refused = ans.refusal()
        self.assertIsInstance(refused, latch.ApprovalRefused)
        self.assertEqual((refused.reason, refused.approval_id), ("approval_expired", asked.approval_id))

    def test_check_reads_an_unknown_outcome_until_resolved(self) -> None:
        @latch.protect("billing.charge", client=self.agent)
        def charge(invoice_id: str, amount: int) -> None:
            raise TimeoutError("read timed out")

        inv = self.invoice()
        with self.assertRaises(latch.OutcomeUnknown) as cm:
            charge(inv, 100)
        err = cm.exception
        self.assertTrue(interruptible(err))
        self.assertEqual(check(self.person, err), Answer("waiting", effect_key="charge:" + inv))
        # An agent's token may not read effects: check says so rather than guess.
        with self.assertRaises(latch.ProblemError) as denied:
            check(self.agent, err)
        self.assertEqual(denied.exception.status, 403)
        self.person.resolve("charge:" + inv, "failed", note="never reached the processor")
        self.assertEqual(check(self.person, err), Answer("resume", effect_key="charge:" + inv, by="http:alice"))

    def test_refusals_to_report_are_not_interruptible(self) -> None:
        self.assertFalse(interruptible(ValueError("x")))
        self.assertFalse(interruptible(latch.Denied("denied")))
        self.assertFalse(interruptible(latch.ApprovalRequired()))
        with self.assertRaises(ValueError):
            check(self.agent, latch.Denied("denied"))


if __name__ == "__main__":
    unittest.main()
