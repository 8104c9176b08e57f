#!/usr/bin/env python3
"""The Python client's conformance driver: runs one scenario's steps with
``viewline.Client`` (clients/conformance/README.md has the protocol)."""
from __future__ import annotations

import json
import pathlib
import re
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "python"))

from viewline import Client, ConnectionClosed, ViewlineError  # noqa: E402
from viewline.errors import ProtocolError, Timeout  # noqa: E402


class StepFailed(Exception):
    pass


def matches(expected: Any, actual: Any) -> bool:
    """The scenarios' one rule: an object matches when each expected key matches,
    an array when it has as many elements and each matches, anything else when equal."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(k in actual and matches(v, actual[k]) for k, v in expected.items())
    if isinstance(expected, list):
        return isinstance(actual, list) and len(actual) == len(expected) and all(
            matches(e, a) for e, a in zip(expected, actual))
    return bool(expected == actual and type(expected) is type(actual)) or (
        isinstance(expected, (int, float)) and not isinstance(expected, bool)
        and isinstance(actual, (int, float)) and not isinstance(actual, bool) and expected == actual)


def expand(line: str, n: int) -> str:
    """`{n}`: the repeat's count (1, 2, …); `{x:N}`: N letters x."""
    line = re.sub(r"\{x:(\d+)\}", lambda m: "x" * int(m.group(1)), line)
    return line.replace("{n}", str(n))


def outcome(call: Any) -> Dict[str, Any]:
    """A command's outcome as the scenarios write it: {ok, result} or {error: code}."""
    try:
        return {"ok": True, "result": call()}
    except Timeout:  # (the client's own failures first: they are ViewlineErrors too)
        return {"ok": False, "error": "timeout"}
    except ProtocolError as error:
        return {"ok": False, "error": "protocol_error", "message": str(error)}
    except ConnectionClosed as error:
        return {"ok": False, "error": "connection_closed", "message": str(error)}
    except ViewlineError as error:
        return {"ok": False, "error": error.code}


class Driver:
    def __init__(self, setup: Dict[str, Any]) -> None:
        self.setup = setup
        self.clients: Dict[str, Client] = {}

    def endpoints(self, via: str) -> List[Tuple[str, int]]:
        return [(n["host"], n["port"]) for n in self.setup["direct" if via == "direct" else "nodes"]]

    def client(self, step: Dict[str, Any]) -> Client:
        name = step["client"]
        if name not in self.clients:
            raise StepFailed(f"no client {name} (connect it first)")
        return self.clients[name]

    def check(self, step: Dict[str, Any], got: Dict[str, Any]) -> None:
        expected = step.get("expect", {"ok": True})
        if "error" in expected:
            if got.get("error") != expected["error"]:
                raise StepFailed(f"expected error {expected['error']}, got {json.dumps(got)[:300]}")
        elif not matches(expected, got):
            raise StepFailed(f"expected {json.dumps(expected)}, got {json.dumps(got)[:300]}")

    def run(self, step: Dict[str, Any]) -> None:
        if step["op"].startswith("wait_") and "expect_error" in step:
            try:
                self.wait(step)
            except StepFailed as failure:
                if step["expect_error"] == "timeout" and "timed out" in str(failure):
                    return
                raise
            raise StepFailed(f"expected the wait to end with {step['expect_error']}")
        self.wait(step) if step["op"].startswith("wait_") else self.act(step)

    def wait(self, step: Dict[str, Any]) -> None:
        self.act(step)

    def act(self, step: Dict[str, Any]) -> None:
        op = step["op"]
        timeout = step.get("timeout_ms", 10000) / 1000
        if op == "connect":
            endpoints = self.endpoints(step.get("via", "proxy"))
            host, port = endpoints[step.get("node", 0)]
            others = [e for e in endpoints if e != (host, port)]
            self.clients[step["client"]] = Client.connect(
                host, port, reconnect=step.get("reconnect", True), nodes=others, timeout=timeout,
                backoff=lambda round: min(0.1 * 2 ** round, 1.0))
        elif op == "send":
            client = self.client(step)
            got: Dict[str, Any] = {}
            for n in range(1, step.get("repeat", 1) + 1):
                line = expand(step["line"], n)
                got = outcome(lambda: client.command(line, timeout=timeout))
                if not got["ok"] and "error" not in step.get("expect", {}):
                    break
            self.check(step, got)
        elif op == "attach":
            client, owner = self.client(step), self.clients[step["to"]]
            self.check(step, outcome(lambda: client.attach(owner.token, timeout=timeout)))
        elif op == "confirm":
            client = self.client(step)
            self.check(step, outcome(lambda: client.confirm(step.get("fields"), timeout=timeout)))
        elif op == "cancel":
            client = self.client(step)
            self.check(step, outcome(lambda: client.cancel(timeout=timeout)))
        elif op == "wait_display":
            where = step.get("where", {})
            try:
                self.client(step).wait_for_display(step["view"], lambda s: matches(where, s), timeout=timeout)
            except Timeout:
                raise StepFailed(f"no display of {step['view']} matching {json.dumps(where)}: timed out") from None
            except ConnectionClosed as error:
                raise StepFailed(f"no display of {step['view']} matching {json.dumps(where)}: {error}") from None
        elif op == "wait_alert":
            try:
                alert = self.client(step).wait_for_alert(timeout=timeout)
            except Timeout:
                raise StepFailed("no alert: timed out") from None
            except ConnectionClosed as error:
                raise StepFailed(f"no alert: {error}") from None
            if not matches(step.get("expect", {}), alert):
                raise StepFailed(f"the alert {json.dumps(alert)[:300]} does not match {json.dumps(step.get('expect'))}")
        elif op == "wait_dismiss":
            try:
                self.client(step).wait_for(lambda m: m.get("type") == "dismiss", timeout=timeout, what="a dismiss")
            except Timeout:
                raise StepFailed("no dismiss: timed out") from None
            except ConnectionClosed as error:
                raise StepFailed(f"no dismiss: {error}") from None
        elif op == "wait_closed":
            client = self.client(step)
            try:
                client.wait_for(lambda m: False, timeout=timeout, what="the end of the session")
                raise StepFailed("the client is still open")
            except ConnectionClosed:
                pass
            except Timeout:
                raise StepFailed("the client is still open") from None
            code = (client.bye or {}).get("code")
            if code != step["bye"]:
                raise StepFailed(f"expected bye {step['bye']}, got {code}")
        elif op == "expect_alert":
            presented = self.client(step).alert
            if step["alert"] is None:
                if presented is not None:
                    raise StepFailed(f"an alert is still presented: {json.dumps(presented)[:300]}")
            elif presented is None or not matches(step["alert"], presented):
                raise StepFailed(f"presented {json.dumps(presented)[:300]}, expected {json.dumps(step['alert'])}")
        elif op == "expect_view":
            state = self.client(step).views.get(step["view"])
            if not matches(step["where"], state):
                raise StepFailed(f"{step['view']} is {json.dumps(state)[:300]}, expected {json.dumps(step['where'])}")
        elif op == "expect_client":
            resumed = self.client(step).resumed
            if resumed < step.get("resumed_at_least", 0) or resumed > step.get("resumed_at_most", resumed):
                raise StepFailed(f"resumed {resumed} times")
        elif op == "sleep":
            time.sleep(step["ms"] / 1000)
        elif op == "control":
            print(json.dumps({"control": step}), flush=True)
            answer = json.loads(sys.stdin.readline() or "{}")
            if not answer.get("done"):
                raise StepFailed(f"the runner could not do it: {answer.get('error')}")
        else:
            raise StepFailed(f"unknown op {op!r}")

    def close(self) -> None:
        for client in self.clients.values():
            client.close()


def main() -> int:
    setup = json.loads(sys.stdin.readline())
    driver = Driver(setup)
    result: Dict[str, Any] = {"pass": True}
    for index, step in enumerate(setup["scenario"]["steps"]):
        try:
            driver.run(step)
        except StepFailed as error:
            result = {"pass": False, "step": index, "op": step["op"], "message": str(error)}
            break
        except Exception as error:  # an unexpected exception is a failure of the client, by name
            result = {"pass": False, "step": index, "op": step["op"], "message": f"{type(error).__name__}: {error}"}
            break
    driver.close()
    print(json.dumps(result), flush=True)
    return 0 if result["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
