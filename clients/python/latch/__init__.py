"""latch: make consequential actions safe to execute, from Python, through ``latch serve``.

One effect runs at most once, an unknown outcome is ambiguous (never failed), approvals are
bound to the exact action, and every decided call leaves a receipt — decided by the server, so
this package is only the client: the standard library, Python 3.9 or later.

    import latch

    client = latch.Client("http://127.0.0.1:7420", token)

    @latch.protect("billing.charge", client=client)
    def charge(invoice_id: str, amount: int) -> dict:
        return processor.charge(invoice_id, amount, key=latch.current().idempotency_token)
"""

from .client import (BEGIN_TRIES, COMMITTED, NOT_EXECUTED, UNKNOWN, Client, LostAnswer, Recorded,
                     Reservation, check_traceparent, new_request_key, traceparent)
from .errors import (KIND_CLASSES, REASON_KINDS, Ambiguous, ApprovalRefused, ApprovalRequired,
                     AttemptsExhausted, AuthorityRefused, Committed, Denied, IdentityRefused,
                     InProgress, Internal, InvalidArgument, KeyConflict, LatchError,
                     NotExecutedRefusal, OutcomeRefused, OutcomeUnknown, ProblemError, Refusal,
                     RequestKeyMismatch, error_of, refusal_class)
from .interrupt import Answer, Interrupter, Poller, check, interruptible
from .protect import NotExecuted, current, protect

__all__ = [
    "BEGIN_TRIES", "COMMITTED", "NOT_EXECUTED", "UNKNOWN", "Client", "LostAnswer", "Recorded",
    "Reservation", "check_traceparent", "new_request_key", "traceparent",
    "KIND_CLASSES", "REASON_KINDS", "Ambiguous", "ApprovalRefused", "ApprovalRequired",
    "AttemptsExhausted", "AuthorityRefused", "Committed", "Denied", "IdentityRefused",
    "InProgress", "Internal", "InvalidArgument", "KeyConflict", "LatchError",
    "NotExecutedRefusal", "OutcomeRefused", "OutcomeUnknown", "ProblemError", "Refusal",
    "RequestKeyMismatch", "error_of", "refusal_class",
    "NotExecuted", "current", "protect",
    "Answer", "Interrupter", "Poller", "check", "interruptible",
]
