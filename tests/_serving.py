"""A test HTTP server answering on a thread of its own for the length of a block; a server process's end."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer


@contextmanager
def serving(server: ThreadingHTTPServer) -> Iterator[int]:
    """`server` serving until the block ends (then shut down and closed); yields its port."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def end(process: subprocess.Popen[bytes] | subprocess.Popen[str], timeout: float = 10.0) -> None:
    """Terminate `process` and wait for it; killed when it has not exited `timeout` seconds on."""
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
