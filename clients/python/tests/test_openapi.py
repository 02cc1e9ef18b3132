"""The client against latch serve's own OpenAPI document: every route the client calls is in
it with its method, every member a method sends is in the route's request schema, and every
field the client reads of a reservation or a recorded outcome is in the answer's schema. A route
renamed or a member dropped on the server fails here."""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import re
import sys
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

import latch  # noqa: E402
from latch import client as client_module  # noqa: E402
from harness import Serve  # noqa: E402


class OpenAPITest(unittest.TestCase):
    doc: dict

    @classmethod
    def setUpClass(cls) -> None:
        serve = Serve()
        try:
            with urllib.request.urlopen(serve.url + "/v1/openapi.json", timeout=10) as r:
                cls.doc = json.load(r)
        finally:
            serve.stop()

    def schema(self, ref_or_schema: dict) -> dict:
        ref = ref_or_schema.get("$ref")
        if ref:
            return self.doc["components"]["schemas"][ref.rsplit("/", 1)[-1]]
        return ref_or_schema

    def operation(self, method: str, path: str) -> dict:
        """operation finds the document's operation for a path the client formats (%s where a
        parameter goes)."""
        for template, ops in self.doc["paths"].items():
            if re.fullmatch(re.sub(r"\{[^}]+\}", "[^/]+", template), path.replace("%s", "X")):
                self.assertIn(method.lower(), ops, "%s %s: the document has %s for %s" % (method, path, list(ops), template))
                return ops[method.lower()]
        self.fail("%s %s: no such route in the OpenAPI document" % (method, path))

    def test_every_route_the_client_calls_is_documented(self) -> None:
        src = inspect.getsource(client_module.Client)
        calls = re.findall(r'self\.request\("([A-Z]+)", "(/v1/[^"?]*)', src)
        self.assertGreaterEqual(len(calls), 10, calls)
        for method, path in calls:
            self.operation(method, path)

    def body_members(self, method_name: str) -> set:
        src = inspect.getsource(getattr(latch.Client, method_name))
        return set(re.findall(r'body\["(\w+)"\]', src)) | set(re.findall(r'body(?:: Dict\[str, Any\])? = \{"(\w+)"', src))

    def request_properties(self, method: str, path: str) -> set:
        op = self.operation(method, path)
        schema = self.schema(op["requestBody"]["content"]["application/json"]["schema"])
        return set(schema.get("properties", {}))

    def test_every_member_the_client_sends_is_in_the_request_schema(self) -> None:
        for name, method, path in [("begin", "POST", "/v1/actions"),
                                   ("complete", "POST", "/v1/actions/%s/outcome"),
                                   ("resolve", "POST", "/v1/effects/%s/resolve")]:
            sent = self.body_members(name)
            self.assertTrue(sent, name)
            self.assertLessEqual(sent, self.request_properties(method, path), name)
        begin = inspect.getsource(latch.Client.begin)
        self.assertIn('"Idempotency-Key"', begin)
        params = {p["name"] for p in self.operation("POST", "/v1/actions").get("parameters", [])}
        self.assertIn("Idempotency-Key", params)

    def answer_properties(self, method: str, path: str, status: str) -> set:
        op = self.operation(method, path)
        schema = self.schema(op["responses"][status]["content"]["application/json"]["schema"])
        return set(schema.get("properties", {}))

    def test_every_field_the_client_reads_is_in_the_answer_schema(self) -> None:
        reservation = {f.name for f in dataclasses.fields(latch.Reservation)} - {"request_key", "raw"}
        self.assertLessEqual(reservation, self.answer_properties("POST", "/v1/actions", "200"))
        approval = self.answer_properties("POST", "/v1/actions", "202")
        self.assertLessEqual({"approval_id", "action_hash", "expires_at", "approval"}, approval)
        recorded = {f.name for f in dataclasses.fields(latch.Recorded)}
        self.assertLessEqual(recorded, self.answer_properties("POST", "/v1/actions/%s/outcome", "200"))


if __name__ == "__main__":
    unittest.main()
