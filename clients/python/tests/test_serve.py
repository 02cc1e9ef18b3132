"""The client and @latch.protect against a real latch serve (SQLite store, CLI-made tokens)."""

from __future__ import annotations

import asyncio
import gzip
import http.server
import json
import os
import socket
import sys
import threading
import time
import types
import unittest
from unittest import mock
from typing import Optional

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import latch  # noqa: E402
from harness import Serve  # noqa: E402
import test_docs  # noqa: E402


class ServeTest(unittest.TestCase):
    serve: Serve

    @classmethod
    def setUpClass(cls) -> None:
        cls.serve = Serve()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.serve.stop()

    def setUp(self) -> None:
        self.agent = latch.Client(self.serve.url, self.serve.agent_token, timeout=15)
        self.person = latch.Client(self.serve.url, self.serve.approver_token, timeout=15)

    def invoice(self) -> str:
        return "inv_%s_%d" % (self.id().rsplit(".", 1)[-1], time.monotonic_ns())

    # --- one execution per effect key ------------------------------------------------------

    def test_lost_reply_runs_once_and_retries_are_refused(self) -> None:
        charges = []

        @latch.protect("billing.charge", client=self.agent)
        def charge(invoice_id: str, amount: int) -> dict:
            charges.append(latch.current().idempotency_token)  # the processor charged…
            raise TimeoutError("read timed out")  # …and its reply was lost

        inv = self.invoice()
        with self.assertRaises(latch.OutcomeUnknown) as first:
            charge(inv, 24900)
        self.assertIsInstance(first.exception.__cause__, TimeoutError)
        self.assertEqual(first.exception.effect_key, "charge:" + inv)
        for _ in range(2):
            with self.assertRaises(latch.Ambiguous) as again:
                charge(inv, 24900)
            self.assertEqual(again.exception.reason, "ambiguous")
            self.assertEqual(again.exception.effect_key, "charge:" + inv)
            self.assertEqual(again.exception.status, 409)
        self.assertEqual(len(charges), 1, "the processor was called %d times" % len(charges))
        self.assertEqual(self.person.effect("charge:" + inv)["state"], "ambiguous")

    def test_a_person_resolves_the_ambiguous_effect_and_the_retry_gets_its_result(self) -> None:
        runs = []

        @latch.protect("billing.charge", client=self.agent, duplicate="return")
        def charge(invoice_id: str, amount: int) -> dict:
            runs.append(invoice_id)
            raise ConnectionResetError("the processor hung up")

        inv = self.invoice()
        with self.assertRaises(latch.OutcomeUnknown):
            charge(inv, 100)
        with self.assertRaises(latch.ProblemError) as own:  # an agent cannot resolve
            self.agent.resolve("charge:" + inv, "failed")
        self.assertEqual(own.exception.status, 403)
        # The person looked in the processor's dashboard: it went through.
        resolved = self.person.resolve("charge:" + inv, "committed", {"charge": "ch_seen"}, note="in the dashboard")
        self.assertEqual(resolved["state"], "committed")
        self.assertEqual(charge(inv, 100), {"charge": "ch_seen"})
        self.assertEqual(runs, [inv])

    def test_an_approver_token_answers_and_a_lease_is_extended(self) -> None:
        inv = self.invoice()
        got = {}
        t = threading.Thread(target=lambda: got.update(r=_catch(
            self.agent.wait_for_approval, "billing.charge", {"invoice_id": inv, "amount": 60000}, timeout=30)))
        t.start()
        req = self.pending_for(inv)
        with self.assertRaises(latch.ProblemError) as agent_answer:
            self.agent.approve(req["approval_id"])
        self.assertEqual((agent_answer.exception.status, agent_answer.exception.reason), (403, "forbidden"))
        answered = self.person.approve(req["approval_id"], note="checked the invoice")
        self.assertEqual(answered["status"], "granted")
        t.join(30)
        r = got["r"]
        self.assertIsInstance(r, latch.Reservation)
        self.assertEqual((r.status, r.approval_id), ("reserved", req["approval_id"]))
        later = self.agent.extend(r.action_id, 3600)
        self.assertGreater(later, r.lease_expires_at)
        self.assertEqual(self.agent.action(r.action_id)["lease_expires_at"], later)
        self.assertEqual(self.agent.complete(r.action_id, latch.NOT_EXECUTED, error="changed our mind").result, "failed")

    def test_duplicate_is_refused_with_the_stored_result(self) -> None:
        runs = []

        @latch.protect("billing.charge", client=self.agent)
        def charge(invoice_id: str, amount: int) -> dict:
            runs.append(invoice_id)
            return {"charge": "ch_%d" % len(runs)}

        inv = self.invoice()
        self.assertEqual(charge(inv, 100), {"charge": "ch_1"})
        with self.assertRaises(latch.Committed) as dup:
            charge(inv, 100)
        self.assertEqual(dup.exception.result, {"charge": "ch_1"})
        self.assertEqual(dup.exception.attempt, 1)
        replay = latch.protect("billing.charge", client=self.agent, duplicate="return")(charge.__wrapped__)
        self.assertEqual(replay(inv, 100), {"charge": "ch_1"})
        self.assertEqual(runs, [inv])

    def test_async_functions_run_once_too(self) -> None:
        runs = []

        @latch.protect("billing.charge", client=self.agent)
        async def charge(invoice_id: str, amount: int) -> dict:
            runs.append(latch.current().effect_key)
            await asyncio.sleep(0)
            if invoice_id.endswith("lost"):
                raise TimeoutError("read timed out")
            return {"charge": "ch_async"}

        self.assertTrue(asyncio.iscoroutinefunction(charge))
        inv = self.invoice()
        self.assertEqual(asyncio.run(charge(inv, 100)), {"charge": "ch_async"})
        with self.assertRaises(latch.Committed) as dup:
            asyncio.run(charge(inv, 100))
        self.assertEqual(dup.exception.result, {"charge": "ch_async"})
        lost = self.invoice() + "_lost"
        with self.assertRaises(latch.OutcomeUnknown):
            asyncio.run(charge(lost, 100))
        with self.assertRaises(latch.Ambiguous):
            asyncio.run(charge(lost, 100))
        self.assertEqual(runs, ["charge:" + inv, "charge:" + lost])
        self.assertIsNone(latch.current())

    def test_a_result_latch_cannot_store_is_recorded_committed_without_it(self) -> None:
        runs = []

        @latch.protect("billing.charge", client=self.agent)
        def charge(invoice_id: str, amount: int) -> dict:
            runs.append(invoice_id)
            return {"charge": "ch_1", "fee": 0.3}

        inv = self.invoice()
        with self.assertRaises(TypeError) as bad:
            charge(inv, 100)
        self.assertIn("/fee", str(bad.exception))
        with self.assertRaises(latch.Committed) as dup:  # it happened: the duplicate is refused
            charge(inv, 100)
        self.assertIsNone(dup.exception.result)
        self.assertEqual(runs, [inv])

    def test_keyword_arguments_are_arguments_and_unnamed_parameters_are_refused(self) -> None:
        seen = []

        @latch.protect("billing.charge", client=self.agent)
        def charge(invoice_id: str, **rest: int) -> dict:
            seen.append(rest)
            return {"ok": True}

        inv = self.invoice()
        self.assertEqual(charge(inv, amount=7), {"ok": True})
        self.assertEqual(seen, [{"amount": 7}])
        self.assertEqual(self.person.effect("charge:" + inv)["state"], "committed")
        with self.assertRaises(TypeError) as bad:
            latch.protect("billing.charge", client=self.agent)(lambda *args: None)
        self.assertIn("arguments=", str(bad.exception))

    def test_not_executed_leaves_the_key_retryable(self) -> None:
        calls = []

        @latch.protect("billing.charge", client=self.agent)
        def charge(invoice_id: str, amount: int) -> dict:
            calls.append(latch.current().attempt)
            if len(calls) == 1:
                raise latch.NotExecuted("card declined before any charge")
            return {"charge": "ch_ok"}

        inv = self.invoice()
        with self.assertRaises(latch.NotExecuted):
            charge(inv, 100)
        self.assertEqual(charge(inv, 100), {"charge": "ch_ok"})
        self.assertEqual(calls, [1, 2])

    def test_a_lost_begin_answer_is_replayed_by_its_request_key(self) -> None:
        # A proxy that forwards the first begin to the server and drops its answer: the server
        # reserved the key, the client saw nothing, and asks again with the same key.
        proxy = DropFirstAnswer(self.serve.url)
        try:
            agent = latch.Client(proxy.url, self.serve.agent_token, timeout=15)
            runs = []

            @latch.protect("billing.charge", client=agent)
            def charge(invoice_id: str, amount: int) -> dict:
                runs.append(latch.current().action_id)
                return {"charge": "ch_1"}

            inv = self.invoice()
            self.assertEqual(charge(inv, 100), {"charge": "ch_1"})
        finally:
            proxy.close()
        self.assertEqual(proxy.dropped, 1, "the proxy dropped no answer")
        self.assertGreaterEqual(proxy.requests, 3, "the begin was not sent again")
        self.assertEqual(len(runs), 1)
        effect = self.person.effect("charge:" + inv)
        self.assertEqual((effect["state"], effect["attempt"]), ("committed", 1))

    def test_a_begin_the_server_could_not_answer_is_sent_again_with_its_key(self) -> None:
        for key in ("k-" + latch.new_request_key(), None):
            proxy = DropFirstAnswer(self.serve.url, unavailable=True)
            try:
                agent = latch.Client(proxy.url, self.serve.agent_token, timeout=15)
                inv = self.invoice()
                if key is None:
                    with self.assertRaises(latch.ProblemError) as err:
                        agent.begin("billing.charge", {"invoice_id": inv, "amount": 100})
                    self.assertEqual((err.exception.status, err.exception.reason), (503, "store_unavailable"))
                    self.assertEqual(proxy.requests, 1)
                    continue
                r = agent.begin("billing.charge", {"invoice_id": inv, "amount": 100}, request_key=key)
                self.assertEqual((r.status, r.attempt, r.request_key), ("reserved", 1, key))
                self.assertEqual(proxy.requests, 2)
            finally:
                proxy.close()

    def test_a_lost_begin_answer_without_a_key_is_not_resent(self) -> None:
        proxy = DropFirstAnswer(self.serve.url)
        try:
            agent = latch.Client(proxy.url, self.serve.agent_token, timeout=15)
            inv = self.invoice()
            with self.assertRaises(latch.LostAnswer):
                agent.begin("billing.charge", {"invoice_id": inv, "amount": 100})
            with self.assertRaises(latch.InProgress):  # its own attempt holds the key
                agent.begin("billing.charge", {"invoice_id": inv, "amount": 100})
        finally:
            proxy.close()

    # --- approvals -------------------------------------------------------------------------

    def pending_for(self, inv: str, timeout: float = 10) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for a in self.person.approvals("pending"):
                if a["arguments"].get("invoice_id") == inv:
                    return a
            time.sleep(0.05)
        self.fail("no pending approval request for %s" % inv)

    def test_approval_wait_returns_once_approved_with_the_cli_and_runs_once(self) -> None:
        runs = []

        @latch.protect("billing.charge", client=self.agent, wait=30)
        def charge(invoice_id: str, amount: int) -> dict:
            runs.append(amount)
            return {"charge": "ch_big"}

        inv = self.invoice()
        got = {}
        t = threading.Thread(target=lambda: got.update(result=_catch(charge, inv, 90000)))
        t.start()
        req = self.pending_for(inv)
        time.sleep(0.3)
        self.assertEqual(runs, [], "ran before anyone approved")
        self.serve.cli("approve", req["approval_id"], "--as", "bob")
        t.join(30)
        self.assertFalse(t.is_alive(), "the wait did not return after the approval")
        self.assertEqual(got["result"], {"charge": "ch_big"})
        self.assertEqual(runs, [90000])
        self.assertEqual(self.person.approval(req["approval_id"])["status"], "consumed")
        # The same call again is a duplicate; the approval is not asked for again.
        with self.assertRaises(latch.Committed) as dup:
            charge(inv, 90000)
        self.assertEqual(dup.exception.result, {"charge": "ch_big"})
        self.assertEqual(runs, [90000])
        self.assertEqual([a for a in self.person.approvals("pending") if a["arguments"].get("invoice_id") == inv], [])

    def test_an_approval_is_bound_to_its_amount(self) -> None:
        inv = self.invoice()
        with self.assertRaises(latch.ApprovalRequired) as ar:
            self.agent.begin("billing.charge", {"invoice_id": inv, "amount": 90000})
        apr = ar.exception.approval_id
        self.assertTrue(apr.startswith("apr_"), apr)
        self.assertEqual(ar.exception.status, 202)
        self.assertEqual(ar.exception.approval["status"], "pending")
        self.serve.cli("approve", apr, "--as", "bob")

        runs = []

        @latch.protect("billing.charge", client=self.agent, approval_id=lambda invoice_id, amount: apr)
        def charge(invoice_id: str, amount: int) -> dict:
            runs.append(amount)
            return {"charge": "ch_1"}

        with self.assertRaises(latch.ApprovalRefused) as other:
            charge(inv, 90001)
        self.assertEqual(other.exception.reason, "approval_mismatch")
        self.assertEqual(other.exception.status, 403)
        self.assertEqual(runs, [])
        self.assertEqual(charge(inv, 90000), {"charge": "ch_1"})
        # Once committed, another amount on the same invoice is refused as a key conflict.
        with self.assertRaises(latch.KeyConflict) as conflict:
            self.agent.begin("billing.charge", {"invoice_id": inv, "amount": 100})
        self.assertEqual(conflict.exception.state, "committed")
        self.assertEqual(runs, [90000])

    def test_the_next_attempt_runs_on_the_grant(self) -> None:
        # A retry cannot present the request its first attempt raised (a queue, a restarted
        # worker): once a person grants it, the same call again runs on the grant, once.
        inv = self.invoice()
        runs = []

        @latch.protect("billing.charge", client=self.agent)
        def charge(invoice_id: str, amount: int) -> dict:
            runs.append(amount)
            return {"charge": "ch_next"}

        with self.assertRaises(latch.ApprovalRequired) as ar:
            charge(inv, 80000)
        self.assertEqual(ar.exception.effect_key, "charge:" + inv)
        self.serve.cli("approve", ar.exception.approval_id, "--as", "bob")
        with self.assertRaises(latch.ApprovalRequired):
            charge(inv, 80001)  # other arguments find nothing of the grant
        self.assertEqual(charge(inv, 80000), {"charge": "ch_next"})
        self.assertEqual(runs, [80000])
        with self.assertRaises(latch.Committed):
            charge(inv, 80000)
        self.assertEqual(runs, [80000])

    def test_the_agents_recipe_runs_the_same_call_again_on_the_grant(self) -> None:
        # The recipe of docs/integrations/openai-agents-python.md, its code taken from the page.
        # The Agents SDK is not installed here: function_tool stands for its decorator, which
        # registers the function and leaves calling it to the run.
        code = next(src for _, src in test_docs.blocks(test_docs.page("openai-agents-python.md"), "python")
                    if "from agents import function_tool" in src)
        refunds = []

        class Payments:
            def refund(self, invoice_id: str, amount: int, idempotency_key: str) -> dict:
                refunds.append(amount)
                return {"refund": "re_" + invoice_id}

        sdk = types.ModuleType("agents")
        sdk.function_tool = lambda fn: fn
        names = {"LATCH_URL": self.serve.url, "AGENT_TOKEN": self.serve.agent_token, "payments": Payments()}
        with mock.patch.dict(sys.modules, {"agents": sdk}):
            exec(compile(code, "openai-agents-python.md", "exec"), names)
        tool = names["refund"]

        inv = self.invoice()
        asked = tool(inv, 90000)
        self.assertIn("approval_required (approval_required)", asked)
        apr = self.pending_for(inv)["approval_id"]
        self.assertIn(apr, asked)
        self.assertIn(apr, tool(inv, 90000), "asked again while pending: the same request")
        self.serve.cli("approve", apr, "--as", "bob")
        other = tool(inv, 90001)
        self.assertIn("approval_required", other)
        self.assertNotIn(apr, other)
        self.assertEqual(json.loads(tool(inv, 90000)), {"refund": "re_" + inv})
        again = tool(inv, 90000)
        self.assertIn("committed (committed)", again)
        self.assertIn('{"refund": "re_%s"}' % inv, again)
        self.assertEqual(refunds, [90000])
        self.assertEqual(self.person.approval(apr)["status"], "consumed")

    def test_a_denied_request_ends_the_wait(self) -> None:
        inv = self.invoice()
        got = {}
        t = threading.Thread(target=lambda: got.update(r=_catch(
            self.agent.wait_for_approval, "billing.charge", {"invoice_id": inv, "amount": 70000}, timeout=30)))
        t.start()
        req = self.pending_for(inv)
        self.serve.cli("deny", req["approval_id"], "--as", "bob")
        t.join(30)
        self.assertIsInstance(got["r"], latch.ApprovalRefused)
        self.assertEqual(got["r"].reason, "approval_denied")

    def test_an_unanswered_wait_raises_approval_required(self) -> None:
        inv = self.invoice()
        start = time.monotonic()
        with self.assertRaises(latch.ApprovalRequired) as ar:
            self.agent.wait_for_approval("billing.charge", {"invoice_id": inv, "amount": 70000},
                                         timeout=2, round_seconds=1)
        self.assertGreaterEqual(time.monotonic() - start, 1.5)
        # One request, asked for once across the rounds.
        mine = [a for a in self.person.approvals("pending") if a["arguments"].get("invoice_id") == inv]
        self.assertEqual([a["approval_id"] for a in mine], [ar.exception.approval_id])

    def test_the_tool_recipe_hands_the_model_readable_refusals(self) -> None:
        # The shape docs/integrations/python.md gives an agent's tool: the model's call carries
        # an optional approval_id that is presented, not hashed; refusals are its output.
        refunds = []

        @latch.protect("billing.charge", client=self.agent,
                       arguments=lambda invoice_id, amount, approval_id=None: {"invoice_id": invoice_id, "amount": amount},
                       approval_id=lambda invoice_id, amount, approval_id=None: approval_id)
        def _charge(invoice_id: str, amount: int, approval_id: str = None) -> dict:
            refunds.append(amount)
            return {"charge": "ch_tool"}

        def tool(invoice_id: str, amount: int, approval_id: Optional[str] = None) -> str:
            try:
                return json.dumps(_charge(invoice_id, amount, approval_id))
            except latch.Refusal as err:
                return err.for_model()

        inv = self.invoice()
        asked = tool(inv, 80000)
        self.assertIn("approval_required", asked)
        apr = self.pending_for(inv)["approval_id"]
        self.assertIn(apr, asked)
        self.assertIn("approval_pending", tool(inv, 80000, apr))
        self.serve.cli("approve", apr, "--as", "bob")
        self.assertIn("approval_mismatch", tool(inv, 80001, apr))
        self.assertEqual(json.loads(tool(inv, 80000, apr)), {"charge": "ch_tool"})
        self.assertIn("approval_consumed", tool(inv, 80000, apr))  # a grant is spent once
        again = tool(inv, 80000)
        self.assertIn("committed", again)
        self.assertIn('{"charge": "ch_tool"}', again)
        self.assertEqual(refunds, [80000])

    # --- refusals and problems -------------------------------------------------------------

    def test_refusals_raise_the_class_of_their_kind(self) -> None:
        with self.assertRaises(latch.Denied) as d:
            self.agent.begin("billing.delete_customer", {"customer": "c_1"})
        self.assertEqual((d.exception.reason, d.exception.kind, d.exception.status), ("denied", "denied", 403))
        self.assertEqual(d.exception.rule, "decision")
        with self.assertRaises(latch.Denied) as u:
            self.agent.begin("payouts.send", {"amount": 1})
        self.assertEqual(u.exception.reason, "unknown_action")
        with self.assertRaises(latch.InvalidArgument) as e:
            self.agent.begin("billing.charge", {"amount": 1})
        self.assertEqual((e.exception.reason, e.exception.status), ("missing_argument", 422))
        with self.assertRaises(latch.ProblemError) as f:
            self.agent.approvals()
        self.assertEqual((f.exception.status, f.exception.reason), (403, "forbidden"))
        with self.assertRaises(latch.ProblemError) as t:
            latch.Client(self.serve.url, "latch_not-a-token").begin("billing.quote", {})
        self.assertEqual(t.exception.status, 401)
        r = self.agent.begin("billing.quote", {"sku": "x"})
        self.assertEqual((r.status, r.effect_key), ("allowed", None))
        with self.assertRaises(latch.OutcomeRefused) as o:
            self.agent.complete("act_0000", latch.COMMITTED, {})
        self.assertEqual((o.exception.reason, o.exception.status), ("no_such_action", 404))

    def test_a_second_outcome_is_refused(self) -> None:
        r = self.agent.begin("billing.charge", {"invoice_id": self.invoice(), "amount": 5})
        self.assertEqual(self.agent.complete(r.action_id, latch.COMMITTED, {"ok": True}).result, "committed")
        with self.assertRaises(latch.OutcomeRefused) as again:
            self.agent.complete(r.action_id, latch.UNKNOWN)
        self.assertEqual(again.exception.reason, "already_recorded")

    # --- trace context ---------------------------------------------------------------------

    def test_traceparent_is_sent(self) -> None:
        seen = []
        rec = Recorder(seen)
        try:
            c = latch.Client(rec.url, "latch_x")
            tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
            with latch.traceparent(tp):
                c.request("GET", "/v1/anything")
            c.request("GET", "/v1/anything")
            c2 = latch.Client(rec.url, "latch_x", traceparent=lambda: tp.replace("01", "00", 1)[:-2] + "00")
            c2.request("GET", "/v1/anything")
        finally:
            rec.close()
        self.assertEqual(seen[0], tp)
        self.assertIsNone(seen[1])
        self.assertEqual(seen[2], "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")
        with self.assertRaises(ValueError):
            with latch.traceparent("00-zz-00f067aa0ba902b7-01"):
                pass
        with self.assertRaises(ValueError):
            latch.check_traceparent("00-00000000000000000000000000000000-00f067aa0ba902b7-01")
        # latch serve takes a call carrying one.
        with latch.traceparent(tp):
            r = self.agent.begin("billing.quote", {"sku": "t"})
        self.assertEqual(r.status, "allowed")


class TraceTest(unittest.TestCase):
    """The traceparent the client sends is the parent of latch serve's spans: the server's
    OTLP export, caught by a stdlib HTTP server, carries the caller's trace id."""

    def test_the_servers_spans_join_the_callers_trace(self) -> None:
        bodies = []
        got = threading.Event()

        class Collector(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                bodies.append((self.path, body))
                got.set()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a) -> None:
                pass

        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Collector)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        serve = Serve(args=("--otel-endpoint", "http://127.0.0.1:%d" % srv.server_address[1]),
                      env={"OTEL_BSP_SCHEDULE_DELAY": "100"})
        trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
        try:
            agent = latch.Client(serve.url, serve.agent_token)
            with latch.traceparent("00-%s-00f067aa0ba902b7-01" % trace_id):
                r = agent.begin("billing.charge", {"invoice_id": "inv_traced", "amount": 5})
                agent.complete(r.action_id, latch.COMMITTED, {"charge": "ch_t"})
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and not any(bytes.fromhex(trace_id) in b for _, b in bodies):
                got.wait(0.2)
                got.clear()
        finally:
            serve.stop()
            srv.shutdown()
            srv.server_close()
        self.assertTrue(bodies, "latch serve exported no spans")
        self.assertEqual(bodies[0][0], "/v1/traces")
        self.assertTrue(any(bytes.fromhex(trace_id) in b for _, b in bodies),
                        "no exported span carries the caller's trace id")
        # And the parent: the caller's span id is some exported span's parent_span_id.
        self.assertTrue(any(bytes.fromhex("00f067aa0ba902b7") in b for _, b in bodies))


def _catch(fn, *args, **kw):
    try:
        return fn(*args, **kw)
    except Exception as err:  # handed to the test thread to assert on
        return err


class DropFirstAnswer:
    """DropFirstAnswer is a TCP proxy to a server that forwards every request and, for the first
    POST /v1/actions, closes the client's connection once the server has answered, without
    passing the answer on: a reply lost on the way back."""

    def __init__(self, upstream: str, unavailable: bool = False):
        # unavailable: answer the first begin 503 store_unavailable without forwarding it.
        self.unavailable = unavailable
        host, port = upstream.split("//", 1)[1].split(":")
        self.upstream = (host, int(port))
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = "http://127.0.0.1:%d" % self.sock.getsockname()[1]
        self.dropped = 0
        self.requests = 0
        self.lock = threading.Lock()
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.handle, args=(conn,), daemon=True).start()

    def handle(self, conn: socket.socket) -> None:
        with conn, socket.create_connection(self.upstream) as up:
            conn.settimeout(10)
            up.settimeout(10)
            while True:
                req = read_message(conn)
                if not req:
                    return
                if self.unavailable and req.startswith(b"POST /v1/actions ") and self.dropped == 0:
                    with self.lock:
                        self.dropped += 1
                        self.requests += 1
                    body = b'{"type":"urn:latch:problem:store_unavailable","status":503,"reason":"store_unavailable","detail":"the store did not answer"}'
                    conn.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/problem+json\r\n"
                                 b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
                    continue
                up.sendall(req)
                resp = read_message(up)
                with self.lock:
                    self.requests += 1
                    drop = req.startswith(b"POST /v1/actions ") and self.dropped == 0
                    if drop:
                        self.dropped += 1
                if drop or not resp:
                    return
                conn.sendall(resp)

    def close(self) -> None:
        self.sock.close()


def read_message(s: socket.socket) -> bytes:
    """read_message reads one HTTP/1.1 message with a Content-Length body (or none)."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(65536)
        if not chunk:
            return b""
        buf += chunk
    head, _, body = buf.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
        if name.strip().lower() == b"transfer-encoding":
            raise RuntimeError("the proxy reads Content-Length bodies only")
    while len(body) < length:
        chunk = s.recv(65536)
        if not chunk:
            return b""
        body += chunk
    return head + b"\r\n\r\n" + body


class Recorder:
    """Recorder is a stdlib HTTP server that notes each request's traceparent and answers {}."""

    def __init__(self, seen: list):
        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                seen.append(self.headers.get("traceparent"))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *a) -> None:
                pass

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = "http://127.0.0.1:%d" % self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.srv.shutdown()
        self.srv.server_close()


if __name__ == "__main__":
    unittest.main()
