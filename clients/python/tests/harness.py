"""A real ``latch serve`` for the tests: built from this repository (or $LATCH_BIN), a SQLite
store in a temporary directory, an agent and an approver token made with the CLI."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from typing import Optional

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))

POLICY = """\
schema: latch.policy/v1
actions:
  billing.charge:
    effect: "charge:{invoice_id}"
    rules:
      - when: { amount_lte: 50000 }
        decision: allow
      - decision: approve
  billing.quote:
    decision: allow
  payments.refund:
    effect: "refund:{invoice_id}"
    rules:
      - when: { amount_lte: 50000 }
        decision: allow
      - decision: approve
  billing.delete_customer:
    decision: deny
"""

_built: Optional[str] = None


def latch_bin() -> str:
    """latch_bin is $LATCH_BIN, else a latch built once from the repository with go build."""
    global _built
    if os.environ.get("LATCH_BIN"):
        return os.environ["LATCH_BIN"]
    if _built is None:
        if shutil.which("go") is None:
            raise RuntimeError("no latch to test: set LATCH_BIN or put go on PATH")
        out = os.path.join(tempfile.mkdtemp(prefix="latch-py-bin-"), "latch")
        subprocess.run(["go", "build", "-o", out, "./cmd/latch"], cwd=REPO, check=True)
        _built = out
    return _built


def free_addr() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return "127.0.0.1:%d" % s.getsockname()[1]


def clean_env() -> dict:
    return {k: v for k, v in os.environ.items() if k not in ("LATCH_STORE", "LATCH_POLICY", "LATCH_APPROVER")}


class Serve:
    """Serve is one latch serve process on a fresh store; stop() ends it. The agent token acts
    as ``agent``, the approver token as ``approver``."""

    def __init__(self, policy: str = POLICY, args: tuple = (), env: Optional[dict] = None,
                 agent: str = "billing-worker", approver: str = "alice"):
        self.bin = latch_bin()
        self.dir = tempfile.mkdtemp(prefix="latch-py-")
        self.policy = os.path.join(self.dir, "latch.yaml")
        with open(self.policy, "w") as f:
            f.write(policy)
        self.store = "sqlite:" + os.path.join(self.dir, "state.db")
        self.agent_token = self.token("--agent", agent)
        self.approver_token = self.token("--approver", approver)
        addr = free_addr()
        self.url = "http://" + addr
        self.log = open(os.path.join(self.dir, "serve.log"), "wb")
        self.proc = subprocess.Popen(
            [self.bin, "--policy", self.policy, "--store", self.store, "serve", "--listen", addr,
             "--sweep", "0", "--no-console", "--max-wait", "5", *args],
            stdout=self.log, stderr=subprocess.STDOUT, env={**clean_env(), **(env or {})})
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(self.url + "/readyz", timeout=1):
                    break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("latch serve never became ready:\n" + self.serve_log())
                time.sleep(0.05)

    def cli(self, *args: str) -> str:
        """cli runs latch with this server's policy and store and returns its standard output."""
        p = subprocess.run([self.bin, "--policy", self.policy, "--store", self.store, *args],
                           capture_output=True, text=True, env=clean_env())
        if p.returncode != 0:
            raise RuntimeError("latch %s: exit %d: %s" % (" ".join(args), p.returncode, p.stderr))
        return p.stdout

    def token(self, *who: str) -> str:
        return json.loads(self.cli("token", "create", *who, "--json"))["token"]

    def serve_log(self) -> str:
        self.log.flush()
        with open(os.path.join(self.dir, "serve.log"), "rb") as f:
            return f.read().decode("utf-8", "replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
