"""`evaltrace review`: a local web app to read traces beside their scores and label them pass or fail.

It listens on 127.0.0.1 only (no option changes that) and prints its URL, with a fresh access
token, before anything else; see `evaluators/results/review/server.py` for what a request must show.
Exit codes: 0 stopped (Ctrl-C); 2 bad input or setup (the port is taken, the web stack is missing).
"""

from __future__ import annotations

import secrets
import socket
import webbrowser
from pathlib import Path
from typing import Annotated

import typer

from evaltrace.cli import _options as opt
from evaltrace.collector.errors import InputError

LOOPBACK = "127.0.0.1"
"""The only address the app listens on."""


def review(
    paths: Annotated[
        list[str] | None,
        typer.Argument(metavar="[PATH...]", help="Run folders or span files to show as traces without scores."),
    ] = None,
    store: opt.StoreOption = None,
    port: Annotated[int, typer.Option("--port", metavar="N", min=0, max=65535, help="Port (0: any free one).")] = 0,
    no_browser: Annotated[
        bool, typer.Option("--no-browser", help="Print the URL only; do not open a browser.")
    ] = False,
    author: Annotated[
        str | None, typer.Option("--author", metavar="NAME", help="Who labels (default: the OS user).")
    ] = None,
) -> None:
    """Open a local web app to read scored traces and label entries or judge scores pass or fail."""
    try:
        import uvicorn

        from evaltrace.evaluators.results.review.data import ReviewData
        from evaltrace.evaluators.results.review.server import Access, create_app
    except ImportError as exc:
        raise InputError(f"evaltrace review needs its web stack: pip install 'evaltrace[review]' ({exc})") from None
    from evaltrace.evaluators.results.store.labels import default_author
    from evaltrace.evaluators.results.store.location import store_folder

    listener = _listen(port)
    chosen = listener.getsockname()[1]
    access = Access(port=chosen, token=secrets.token_urlsafe(24), author=author or default_author())
    app = create_app(ReviewData(Path(store_folder(store)), tuple(paths or ())), access)
    url = f"http://{LOOPBACK}:{chosen}/#token={access.token}"
    typer.echo(f"evaltrace review: {url}")
    typer.echo("Ctrl-C stops it.", err=True)
    if not no_browser:
        webbrowser.open(url)
    config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False, server_header=False)
    uvicorn.Server(config).run(sockets=[listener])


def _listen(port: int) -> socket.socket:
    """A socket bound to 127.0.0.1:`port`."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((LOOPBACK, port))
    except OSError as exc:
        listener.close()
        raise InputError(f"--port {port}: cannot listen on {LOOPBACK}:{port}: {exc.strerror or exc}") from None
    listener.listen(128)
    return listener
