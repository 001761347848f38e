"""Headless Chromium driven over the DevTools protocol, for the HTML report tests.

The browser is Debian's `chromium` package. When it is missing, `chromium_executable()` installs
it with `apt-get install -y chromium` (CI runs as root; `apt-get update` first if the package is
unknown), under a file lock so parallel runs install once. Where that cannot be done the test
FAILS with the command to run: a browser test that silently skips proves nothing.

`Page` speaks the protocol itself over one WebSocket (the `websockets` package's sync client):
commands with ids, and every event kept in order, so a test can assert that no console error,
CSP violation, uncaught exception or JavaScript dialog (an `alert` some hostile text smuggled in)
happened while the page loaded and was used. The browser runs with a profile in a temporary
folder, no network proxy, and only ever opens the file:// page under test or a server of the test's
own on 127.0.0.1 (`evaltrace review`).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import httpx
import pytest
from _serving import end
from _venvs import locked
from websockets.sync.client import ClientConnection, connect

INSTALL_HINT = "install Chromium with: apt-get install -y chromium (Debian/Ubuntu, as root)"
START_TIMEOUT = 60.0
COMMAND_TIMEOUT = 30.0
_LOCK = Path(tempfile.gettempdir()) / "evaltrace-chromium-install.lock"


def chromium_executable() -> str:
    """The Chromium binary, installed through apt when missing; fails the test when that cannot be done."""
    found = _which()
    if found:
        return found
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        pytest.fail(f"the HTML report tests need Chromium, which is not installed: {INSTALL_HINT}", pytrace=False)
    with locked(_LOCK, timeout=1200.0):
        if not _which():
            _apt("install", "-y", "chromium")
    found = _which()
    if not found:
        pytest.fail(f"apt-get installed no chromium binary: {INSTALL_HINT}", pytrace=False)
    return found


def _which() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _apt(*args: str) -> None:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    done = subprocess.run(["apt-get", *args], env=env, capture_output=True, text=True, timeout=1200)
    if done.returncode != 0 and args[0] == "install":  # an old or empty package list: refresh it once
        subprocess.run(["apt-get", "update"], env=env, capture_output=True, text=True, timeout=600)
        done = subprocess.run(["apt-get", *args], env=env, capture_output=True, text=True, timeout=1200)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-20:])
        pytest.fail(f"apt-get {' '.join(args)} failed ({INSTALL_HINT}):\n{tail}", pytrace=False)


class Page:
    """One browser tab: protocol commands, the events seen so far, and a few helpers for tests."""

    def __init__(self, socket: ClientConnection) -> None:
        self._socket = socket
        self._next_id = 0
        self.events: list[dict[str, Any]] = []

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        """Run one protocol command and return its result (events arriving meanwhile are kept)."""
        self._next_id += 1
        ident = self._next_id
        self._socket.send(json.dumps({"id": ident, "method": method, "params": params}))
        deadline = time.monotonic() + COMMAND_TIMEOUT
        while True:
            message = json.loads(self._socket.recv(timeout=max(0.1, deadline - time.monotonic())))
            if message.get("id") == ident:
                if "error" in message:
                    raise AssertionError(f"{method} failed: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result
            if "method" in message:
                self.events.append(message)

    def wait_for(self, event: str, timeout: float = COMMAND_TIMEOUT) -> dict[str, Any]:
        """The first `event` seen (already or within `timeout` seconds)."""
        deadline = time.monotonic() + timeout
        while True:
            for seen in self.events:
                if seen["method"] == event:
                    return seen
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {event} within {timeout} s")
            try:
                message = json.loads(self._socket.recv(timeout=left))
            except TimeoutError:
                continue
            if "method" in message:
                self.events.append(message)

    def open(self, path: Path | str) -> None:
        """Load a local file, or an http://127.0.0.1 URL, and wait for its load event."""
        url = path if isinstance(path, str) else path.resolve().as_uri()
        assert url.startswith(("file://", "http://127.0.0.1:")), url
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable")
        self.events = [e for e in self.events if e["method"] != "Page.loadEventFired"]  # the last page's
        self.send("Page.navigate", url=url)
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        """The JSON value of a JavaScript expression in the page."""
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression!r} threw: {result['exceptionDetails']}")
        return result["result"].get("value")

    def text_of(self, selector: str, prop: str = "innerText", timeout_ms: int = 10_000) -> str:
        """`prop` of the element `selector` once it exists: what a click fills in, it fills in a later task
        (a `details` element's `toggle` event is dispatched asynchronously)."""
        return str(
            self.evaluate(
                "new Promise((resolve, reject) => { const start = Date.now(); (function poll() {"
                f" const e = document.querySelector({json.dumps(selector)});"
                f" if (e) return resolve(e[{json.dumps(prop)}]);"
                f" if (Date.now() - start > {timeout_ms})"
                f" return reject(new Error('no element ' + {json.dumps(selector)}));"
                " setTimeout(poll, 20); })(); })"
            )
        )

    def click(self, selector: str) -> None:
        """A real mouse click (press and release) in the middle of the element `selector`."""
        box = self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
            " e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();"
            " return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left", clickCount=1)

    def screenshot(self, path: Path) -> Path:
        """The whole page as a PNG at `path`."""
        data = self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def problems(self) -> list[str]:
        """Console errors, uncaught exceptions, CSP and other browser errors, and dialogs seen so far."""
        found = []
        for event in self.events:
            method, params = event["method"], event.get("params", {})
            if method == "Runtime.exceptionThrown":
                found.append(f"exception: {params['exceptionDetails']}")
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                found.append(f"console.{params['type']}: {params.get('args')}")
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                found.append(f"log: {params['entry'].get('text')}")
            elif method == "Page.javascriptDialogOpening":
                found.append(f"dialog: {params.get('type')} {params.get('message')!r}")
        return found


@contextmanager
def headless_page(executable: str) -> Iterator[Page]:
    """A new headless Chromium (its own temporary profile) and a connection to its blank tab."""
    with tempfile.TemporaryDirectory(prefix="evaltrace-chromium-") as profile:
        args = [
            executable, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
            "--no-proxy-server", "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
            f"--user-data-dir={profile}", "--window-size=1280,1600", "about:blank",
        ]  # fmt: skip
        log = Path(profile) / "chromium.log"
        with log.open("w") as errors:
            # its own process group, so that every process of this browser can be waited for (see _stop)
            process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=errors, process_group=0)
        try:
            port = _debugging_port(Path(profile), process, log)
            tabs = httpx.get(f"http://127.0.0.1:{port}/json/list", timeout=10, trust_env=False).json()
            url = next(tab["webSocketDebuggerUrl"] for tab in tabs if tab["type"] == "page")
            with connect(url, max_size=None, proxy=None) as socket:
                yield Page(socket)
        finally:
            _stop(process)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """End the browser and every process it started, before its profile folder is removed.

    The main process can exit before its children: under load the network service was seen still
    running (and writing into the profile) ~0.15 s after it, so removing the folder once the main
    process alone had exited failed with 'Directory not empty'. The whole process group is waited for.
    """
    end(process)
    if not _group_gone(process.pid, timeout=10.0):
        with suppress(ProcessLookupError):  # children still there 10 s on: no clean exit left to wait for
            os.killpg(process.pid, signal.SIGKILL)
        if not _group_gone(process.pid, timeout=10.0):
            raise AssertionError(f"chromium's processes (group {process.pid}) did not exit")


def _group_gone(group: int, timeout: float) -> bool:
    """Whether no process of `group` is left within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.02)
    return False


def _debugging_port(profile: Path, process: subprocess.Popen[bytes], log: Path) -> int:
    """The port Chromium chose, from the `DevToolsActivePort` file it writes in its profile."""
    marker = profile / "DevToolsActivePort"
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"chromium exited with {process.returncode}: {log.read_text()[-2000:]}")
        if marker.exists() and marker.read_text().strip():
            return int(marker.read_text().split()[0])
        time.sleep(0.1)
    raise AssertionError(f"chromium did not open its DevTools port within {START_TIMEOUT} s")
