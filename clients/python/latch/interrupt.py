"""The interrupt contract between latch and a framework that can pause a piece of work for a
person and resume it with the answer, as package ``interrupt`` of the Go module defines it.

A protected call refused approval_required, or whose effect's outcome is unknown, is not a
failure to report: it waits for a person (who answers the approval request) or for a resolution
(a person or a reconcile hook settles the effect). An Interrupter routes such a refusal
(``interruptible``) through the framework's own pause and returns the Answer it resumed with:
``resume`` runs the call again, unchanged — the server finds the granted, unspent request for
the exact action by itself, spends it once and runs; ``denied`` and ``expired`` stop with the
ApprovalRefused that ``Answer.refusal()`` builds. ``check`` reads, once, where a wait stands;
``Poller`` is the Interrupter for work that can block. docs/integrations/interrupts.md.
"""

from __future__ import annotations

import datetime
import threading
import time
from dataclasses import dataclass
from typing import Optional

from .client import Client
from .errors import ApprovalRefused, Refusal

try:
    from typing import Protocol
except ImportError:  # pragma: no cover - Python < 3.8 is not supported anyway
    Protocol = object  # type: ignore[assignment,misc]

WAITING = "waiting"
RESUME = "resume"
DENIED = "denied"
EXPIRED = "expired"

# DEFAULT_POLL_EVERY is how often, in seconds, a Poller reads where a wait stands by default.
DEFAULT_POLL_EVERY = 2.0


@dataclass(frozen=True)
class Answer:
    """Answer is how an interrupt ended, or where it stands: what the framework resumes with.

    ``status`` is waiting, resume, denied or expired; ``approval_id`` the request the answer is
    about (with denied, the request a person denied); ``effect_key`` the effect the call is for;
    ``by`` who answered or resolved; ``pending``, with denied, a request for the same action
    asked after the denial."""

    status: str
    approval_id: Optional[str] = None
    effect_key: Optional[str] = None
    by: Optional[str] = None
    pending: Optional[str] = None

    def refusal(self) -> Optional[ApprovalRefused]:
        """refusal is what a call that stops on this answer raises: ApprovalRefused
        approval_denied for denied, approval_expired for expired; None for waiting and resume."""
        if self.status == DENIED:
            reason = "approval_denied"
        elif self.status == EXPIRED:
            reason = "approval_expired"
        else:
            return None
        detail = "approval %s %s" % (self.approval_id or "", self.status)
        if self.by:
            detail += " by " + self.by
        if self.pending:
            detail += "; request %s asks again" % self.pending
        return ApprovalRefused(reason, detail, 0, {
            "reason": reason, "kind": "approval_refused", "approval_id": self.approval_id,
            "effect_key": self.effect_key})


class Interrupter(Protocol):
    """Interrupter routes a refusal a framework can wait out through the framework's own pause
    and returns the answer it resumed with: resume, denied or expired (never waiting). An
    exception means the wait itself failed; nothing was decided."""

    def interrupt(self, refusal: Refusal) -> Answer:
        ...


def interruptible(err: BaseException) -> bool:
    """interruptible reports whether err is a refusal a framework can wait out: approval_required
    naming its request (``approval_id``), or an unknown outcome (kind ambiguous or
    outcome_unknown) naming its effect (``effect_key``)."""
    if not isinstance(err, Refusal):
        return False
    if err.kind == "approval_required":
        return bool(err.approval_id)
    return err.kind in ("ambiguous", "outcome_unknown") and bool(err.effect_key)


def check(client: Client, err: Refusal) -> Answer:
    """check reads, once, where the wait for the refusal err stands.

    approval_required: GET /v1/approvals/{id} (an agent's token may read it). Pending and
    unexpired is waiting — unless the request records that the last answer to its exact action
    was a denial (the attempt after a denial asked again): that is denied, naming the denied
    request, with the new one in ``pending``. Granted or consumed is resume; denied is denied;
    expired, or pending past its expiry, is expired.

    An unknown outcome: GET /v1/effects/{key}, which needs a person's (approver) token; with an
    agent's token the server answers 403 and check raises that ProblemError. Still ambiguous is
    waiting; resolved is resume.

    Raises ValueError for a refusal that is not interruptible."""
    if not interruptible(err):
        raise ValueError("check: %r is not a refusal a person or a resolution answers" % (err,))
    if err.kind != "approval_required":
        eff = client.effect(err.effect_key or "")
        if eff.get("state") == "ambiguous":
            return Answer(WAITING, effect_key=err.effect_key)
        return Answer(RESUME, effect_key=err.effect_key, by=eff.get("resolved_by") or None)
    a = client.approval(err.approval_id or "")
    status = a.get("status")
    aid = a.get("approval_id") or err.approval_id
    by = a.get("approver") or None
    if status in ("granted", "consumed"):
        return Answer(RESUME, aid, err.effect_key, by)
    if status == "denied":
        return Answer(DENIED, aid, err.effect_key, by)
    if status == "expired":
        return Answer(EXPIRED, aid, err.effect_key, by)
    if a.get("previous_denied"):
        return Answer(DENIED, a["previous_denied"], err.effect_key, a.get("previous_denied_by") or None, aid)
    exp = _parse_time(a.get("expires_at"))
    if exp is not None and exp <= datetime.datetime.now(datetime.timezone.utc):
        return Answer(EXPIRED, aid, err.effect_key, by)
    return Answer(WAITING, aid, err.effect_key, by)


def _parse_time(s: Optional[str]) -> Optional[datetime.datetime]:
    if not s:
        return None
    # RFC 3339 with up to nanoseconds: fromisoformat (3.9) takes "+00:00" and six digits.
    s = s.replace("Z", "+00:00")
    if "." in s:
        head, rest = s.split(".", 1)
        i = 0
        while i < len(rest) and rest[i].isdigit():
            i += 1
        s = head + "." + rest[:i][:6].ljust(6, "0") + rest[i:]
    return datetime.datetime.fromisoformat(s)


class Poller:
    """Poller is the Interrupter for work that can block (an in-process tool call, a request
    handler, a worker holding its job): interrupt reads ``check`` every ``every`` seconds
    (default DEFAULT_POLL_EVERY) until the wait is over, and raises TimeoutError when
    ``timeout`` seconds pass, or ``stop`` (a threading.Event) is set, first: the wait failed,
    nothing was decided. It is not durable: a process that stops loses the wait (the request
    stays stored, and the call run again meets it). ``client`` reads the approval (any token)
    or the effect (a person's token)."""

    def __init__(self, client: Client, every: float = DEFAULT_POLL_EVERY,
                 timeout: Optional[float] = None, stop: Optional[threading.Event] = None):
        self.client = client
        self.every = every if every > 0 else DEFAULT_POLL_EVERY
        self.timeout = timeout
        self.stop = stop or threading.Event()

    def interrupt(self, refusal: Refusal) -> Answer:
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        while True:
            ans = check(self.client, refusal)
            if ans.status != WAITING:
                return ans
            pause = self.every
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("latch: wait for %s: no answer within %ss" % (_what(refusal), self.timeout))
                pause = min(pause, left)
            if self.stop.wait(pause):
                raise TimeoutError("latch: wait for %s: stopped" % _what(refusal))


def _what(r: Refusal) -> str:
    return "approval %s" % r.approval_id if r.approval_id else "effect %s" % r.effect_key
