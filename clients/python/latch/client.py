"""A client of the /v1 API of ``latch serve``, with nothing but the standard library.

A remote executor begins an action (``Client.begin``: decide, approve, reserve), acts on the
arguments the server hashed with the idempotency token it was handed, and reports what happened
(``Client.complete``): ``committed`` with the result, ``not_executed`` when it knows nothing
happened, ``unknown`` when it does not know — never "failed". Refusals raise the exception of
their kind (latch.errors). Routes and members: docs/http.md.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import re
import secrets
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from http.client import HTTPException
from typing import Any, Callable, Dict, Iterator, List, Optional

from .errors import ApprovalRequired, LatchError, ProblemError, error_of

# The W3C trace context of the caller's span, sent as the traceparent header of every request
# made while it is set (``with latch.traceparent(...)``), so that latch serve's spans are its
# children. A Client's own ``traceparent`` callable is asked when none is set here.
_TRACEPARENT: contextvars.ContextVar[Optional[str]] = contextvars.ContextVar("latch_traceparent", default=None)
_TRACEPARENT_RE = re.compile(r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$")
# A request key: 1 to 255 bytes of the alphabet latch serve takes in Idempotency-Key.
# The bound latch serve names when a wait_seconds passes its --max-wait.
_MAX_WAIT_RE = re.compile(r"wait_seconds must be 0 to (\d+)")
_REQUEST_KEY_RE = re.compile(r"^[A-Za-z0-9\-_.:~+/=]{1,255}$")

# A keyed begin whose answer was lost, or that the server could not answer for now, is sent
# again with its key this many times in all, pausing BEGIN_BACKOFF seconds, doubled each time.
BEGIN_TRIES = 6
BEGIN_BACKOFF = 0.1
# The statuses that mean "could not answer for now": asking again with the key is safe.
_RETRY_STATUSES = (429, 502, 503, 504)


def check_traceparent(value: str) -> str:
    """check_traceparent returns value if it is a W3C traceparent (version-traceid-spanid-flags,
    lowercase hex, neither id all zeros), else raises ValueError naming what is wrong."""
    if not _TRACEPARENT_RE.match(value) or value.startswith("ff"):
        raise ValueError("traceparent %r is not VERSION-TRACEID(32 hex)-SPANID(16 hex)-FLAGS" % value)
    _, trace_id, span_id, _ = value.split("-")
    if set(trace_id) == {"0"} or set(span_id) == {"0"}:
        raise ValueError("traceparent %r has an all-zero trace or span id" % value)
    return value


@contextlib.contextmanager
def traceparent(value: str) -> Iterator[None]:
    """traceparent sends value as the W3C traceparent header of every request made in the
    with-block (in this thread or task), so the server's spans join the caller's trace."""
    token = _TRACEPARENT.set(check_traceparent(value))
    try:
        yield
    finally:
        _TRACEPARENT.reset(token)


def new_request_key() -> str:
    """new_request_key returns a fresh random request key for a begin: 32 hex digits."""
    return secrets.token_hex(16)


class LostAnswer(LatchError):
    """LostAnswer: a request got no answer — the connection failed or dropped, or it timed out.
    Whether the server acted on it is not known."""

    def __init__(self, method: str, path: str, cause: BaseException):
        self.cause = cause
        super().__init__("latch serve: %s %s: no answer: %s" % (method, path, cause))


@dataclass
class Reservation:
    """Reservation is a begun action (POST /v1/actions answered 200): ``status`` is ``reserved``
    (an effect key was reserved) or ``allowed`` (the action names no effect). Act on
    ``arguments`` — the canonical form the server hashed — and hand ``idempotency_token`` (per
    attempt) or ``effect_token`` (the same for every attempt of the key) to the remote system as
    its idempotency key."""

    status: str
    action_id: str
    action: str
    action_hash: str
    arguments: Dict[str, Any]
    effect_key: Optional[str]
    attempt: Optional[int]
    idempotency_token: Optional[str]
    effect_token: Optional[str]
    lease_expires_at: Optional[str]
    approval_id: Optional[str]
    decision: Optional[str]
    reason: Optional[str]
    request_key: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any], request_key: Optional[str]) -> "Reservation":
        return cls(status=d.get("status", ""), action_id=d.get("action_id", ""),
                   action=d.get("action", ""), action_hash=d.get("action_hash", ""),
                   arguments=d.get("arguments") or {}, effect_key=d.get("effect_key"),
                   attempt=d.get("attempt"), idempotency_token=d.get("idempotency_token"),
                   effect_token=d.get("effect_token"), lease_expires_at=d.get("lease_expires_at"),
                   approval_id=d.get("approval_id"), decision=d.get("decision"),
                   reason=d.get("reason"), request_key=request_key, raw=d)


@dataclass
class Recorded:
    """Recorded is a recorded outcome (POST /v1/actions/{id}/outcome answered 200). ``result``
    is the receipt's: ``committed``, ``failed`` (for not_executed), ``ambiguous`` (for unknown,
    or when the lease had lapsed and another attempt made the effect ambiguous first),
    ``observed`` in observe mode."""

    action_id: str
    result: str
    error: Optional[str]
    receipt: Dict[str, Any]
    receipt_hash: str


# Outcomes an executor reports.
COMMITTED = "committed"
NOT_EXECUTED = "not_executed"
UNKNOWN = "unknown"


class Client:
    """Client talks to one ``latch serve`` with one bearer token (``latch token create``).

    ``timeout`` bounds each request in seconds; a begin that waits for an approval gets its
    wait on top. ``traceparent``, when given, is asked for the W3C traceparent of the current
    span before each request (return None for none): plug an OpenTelemetry propagator in here;
    ``with latch.traceparent(...)`` takes precedence. A Client holds no connection and is safe to
    share between threads."""

    def __init__(self, base_url: str, token: str, *, timeout: float = 30.0,
                 traceparent: Optional[Callable[[], Optional[str]]] = None):
        if not base_url.startswith(("http://", "https://")):
            raise ValueError("base_url %r: want http://HOST:PORT or https://…" % base_url)
        if not token:
            raise ValueError("token is empty: create one with `latch token create`")
        self.base_url = base_url.rstrip("/")
        self._token = token
        self.timeout = timeout
        self._traceparent = traceparent

    # --- transport -------------------------------------------------------------------------

    def _trace_header(self) -> Optional[str]:
        tp = _TRACEPARENT.get()
        if tp is None and self._traceparent is not None:
            got = self._traceparent()
            tp = check_traceparent(got) if got else None
        return tp

    def request(self, method: str, path: str, body: Any = None, *,
                headers: Optional[Dict[str, str]] = None, timeout: Optional[float] = None) -> "tuple[int, Any]":
        """request sends one request and returns (status, decoded JSON) for a 2xx answer. Any
        other answer raises the refusal of its kind, or a ProblemError; no answer raises
        LostAnswer."""
        data = None if body is None else json.dumps(body, allow_nan=False).encode("utf-8")
        h = {"Authorization": "Bearer " + self._token, "Accept": "application/json"}
        if data is not None:
            h["Content-Type"] = "application/json"
        tp = self._trace_header()
        if tp:
            h["traceparent"] = tp
        h.update(headers or {})
        req = urllib.request.Request(self.base_url + path, data=data, method=method, headers=h)
        try:
            with urllib.request.urlopen(req, timeout=timeout or self.timeout) as resp:
                raw = resp.read()
                status = resp.status
        except urllib.error.HTTPError as err:
            raw = err.read()
            try:
                problem = json.loads(raw)
            except ValueError:
                problem = None
            if not isinstance(problem, dict) or "type" not in problem:
                problem = {"reason": "not_a_problem", "detail": raw.decode("utf-8", "replace").strip()}
            raise error_of(err.code, problem) from None
        except (urllib.error.URLError, HTTPException, OSError, socket.timeout) as err:
            raise LostAnswer(method, path, err) from err
        if not raw:
            return status, None
        try:
            return status, json.loads(raw)
        except ValueError as err:
            raise LostAnswer(method, path, err) from err

    # --- the executor's routes -------------------------------------------------------------

    def begin(self, action: str, arguments: Optional[Dict[str, Any]] = None, *,
              approval_id: Optional[str] = None, wait_seconds: int = 0,
              request_key: Optional[str] = None, resource: Optional[str] = None,
              task: Optional[str] = None, hop: Optional[str] = None) -> Reservation:
        """begin begins an action (POST /v1/actions): decided, approved and, with an effect key,
        reserved. It returns the Reservation, or raises ApprovalRequired (the request stored for
        a person: ``approval_id``) or the refusal of its kind — Committed carries the stored
        ``result`` of the effect.

        ``request_key`` is sent as the Idempotency-Key header; with one, a begin whose answer is
        lost, or that the server cannot answer for now (429, 502, 503, 504), is sent again with
        it, up to BEGIN_TRIES times, and the server hands back the same reservation. Without
        one, a lost answer raises LostAnswer: asking again could only meet the first attempt
        (in_progress). ``wait_seconds`` (up to the server's --max-wait) waits that long for a
        person's answer when approval is required."""
        body: Dict[str, Any] = {"action": action, "arguments": arguments or {}}
        if approval_id:
            body["approval_id"] = approval_id
        if wait_seconds:
            body["wait_seconds"] = int(wait_seconds)
        if resource is not None:
            body["resource"] = resource
        if task is not None:
            body["task"] = task
        if hop is not None:
            body["hop"] = hop
        headers = {}
        if request_key is not None:
            if not _REQUEST_KEY_RE.match(request_key):
                raise ValueError("request_key %r: want 1 to 255 bytes of A-Z a-z 0-9 - _ . : ~ + / =" % request_key)
            headers["Idempotency-Key"] = request_key
        timeout = self.timeout + max(0, int(wait_seconds))
        pause = BEGIN_BACKOFF
        for attempt in range(1, BEGIN_TRIES + 1):
            try:
                status, answer = self.request("POST", "/v1/actions", body, headers=headers, timeout=timeout)
                break
            except (LostAnswer, ProblemError) as err:
                retry = isinstance(err, LostAnswer) or err.status in _RETRY_STATUSES
                if request_key is None or not retry or attempt == BEGIN_TRIES:
                    raise
                time.sleep(pause)
                pause *= 2
        if status == 202:
            answer = dict(answer or {})
            answer.setdefault("reason", "approval_required")
            raise ApprovalRequired("approval_required", "a person must approve %s" % action, status, answer)
        return Reservation.from_json(answer or {}, request_key)

    def wait_for_approval(self, action: str, arguments: Optional[Dict[str, Any]] = None, *,
                          timeout: float, request_key: Optional[str] = None,
                          round_seconds: int = 60, **kw: Any) -> Reservation:
        """wait_for_approval begins the action and, while a person has not answered, asks
        again — with the same request key, waiting up to ``round_seconds`` each round on the
        server — until ``timeout`` seconds have passed. A grant is spent and the reservation
        returned; a denial or an expiry raises ApprovalRefused; no answer in time raises the
        last ApprovalRequired. The request key makes each round find the same stored request
        (and, once granted, the reservation it made), never ask for a second one."""
        key = request_key or new_request_key()
        deadline = time.monotonic() + timeout
        bound = int(round_seconds)
        while True:
            left = deadline - time.monotonic()
            wait = max(1, min(bound, int(left)))
            try:
                return self.begin(action, arguments, request_key=key, wait_seconds=wait, **kw)
            except ApprovalRequired:
                if time.monotonic() >= deadline:
                    raise
            except ProblemError as err:
                # A server started with a shorter --max-wait names its bound: wait that long.
                m = _MAX_WAIT_RE.search(err.detail)
                if err.reason != "invalid_field" or err.field != "wait_seconds" or not m or int(m.group(1)) >= wait:
                    raise
                bound = max(1, int(m.group(1)))

    def complete(self, action_id: str, outcome: str, result: Any = None,
                 error: Optional[str] = None) -> Recorded:
        """complete records what happened to a begun action (POST /v1/actions/{id}/outcome):
        COMMITTED with the result (stored, and handed to later duplicates), NOT_EXECUTED (you
        know nothing happened: the key may be retried) or UNKNOWN (a timeout, a lost reply: the
        key is blocked until someone resolves it). Only the principal that began it can, once."""
        if outcome not in (COMMITTED, NOT_EXECUTED, UNKNOWN):
            raise ValueError("outcome %r: want committed, not_executed or unknown" % outcome)
        body: Dict[str, Any] = {"outcome": outcome}
        if result is not None:
            body["result"] = result
        if error is not None:
            body["error"] = error
        _, d = self.request("POST", "/v1/actions/%s/outcome" % _seg(action_id), body)
        return Recorded(action_id=d.get("action_id", ""), result=d.get("result", ""),
                        error=d.get("error"), receipt=d.get("receipt") or {},
                        receipt_hash=d.get("receipt_hash", ""))

    def extend(self, action_id: str, seconds: int) -> str:
        """extend extends the live lease of a long execution to end ``seconds`` from now and
        returns its new end; a lease that lapsed raises OutcomeRefused (lease_lost): stop."""
        _, d = self.request("POST", "/v1/actions/%s/lease" % _seg(action_id), {"seconds": int(seconds)})
        return d.get("lease_expires_at", "")

    def action(self, action_id: str) -> Dict[str, Any]:
        """action is a begun action as it stands (GET /v1/actions/{id})."""
        return self.request("GET", "/v1/actions/%s" % _seg(action_id))[1]

    # --- people's routes (an approver token) ------------------------------------------------

    def approvals(self, status: str = "pending") -> List[Dict[str, Any]]:
        """approvals lists approval requests (GET /v1/approvals?status=…): an approver token."""
        q = urllib.parse.urlencode({"status": status})
        return self.request("GET", "/v1/approvals?" + q)[1].get("approvals", [])

    def approval(self, approval_id: str) -> Dict[str, Any]:
        """approval is one approval request (GET /v1/approvals/{id})."""
        return self.request("GET", "/v1/approvals/%s" % _seg(approval_id))[1]

    def approve(self, approval_id: str, note: Optional[str] = None) -> Dict[str, Any]:
        """approve grants a pending request as the approver token's person."""
        body = {} if note is None else {"note": note}
        return self.request("POST", "/v1/approvals/%s/approve" % _seg(approval_id), body)[1]

    def deny(self, approval_id: str, note: Optional[str] = None) -> Dict[str, Any]:
        """deny denies a pending request as the approver token's person."""
        body = {} if note is None else {"note": note}
        return self.request("POST", "/v1/approvals/%s/deny" % _seg(approval_id), body)[1]

    def effect(self, key: str) -> Dict[str, Any]:
        """effect is one effect key's record (GET /v1/effects/{key})."""
        return self.request("GET", "/v1/effects/%s" % _seg(key))[1]

    def resolve(self, key: str, to: str, result: Any = None, note: Optional[str] = None) -> Dict[str, Any]:
        """resolve resolves an ambiguous effect ``committed`` (with its result) or ``failed``
        (POST /v1/effects/{key}/resolve): a person who made no attempt on it."""
        body: Dict[str, Any] = {"to": to}
        if result is not None:
            body["result"] = result
        if note is not None:
            body["note"] = note
        return self.request("POST", "/v1/effects/%s/resolve" % _seg(key), body)[1]


def _seg(s: str) -> str:
    """_seg escapes s as one path segment (an effect key may hold '/' or '?')."""
    return urllib.parse.quote(s, safe="")


