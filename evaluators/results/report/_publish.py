"""A report file written under a hidden temporary name and renamed into place, so no reader sees half of it."""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import IO

from evaltrace.collector.errors import InputError


class AtomicFile:
    """Bytes written to `.NAME.PID-RANDOM.tmp` beside `destination`, renamed to it by `publish`.

    The temporary file is opened at once, so an unwritable destination is reported before any
    scoring work; `discard` removes it when the report is not finished.
    """

    def __init__(self, destination: str, what: str) -> None:
        """Open the temporary file.

        Args:
            destination: the path the report is published to.
            what: the report's name in error messages ("JUnit report").

        Raises:
            InputError: the folder does not exist or cannot be written.
        """
        self.destination = destination
        self._what = what
        path = Path(destination)
        self._temp: Path | None = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
        try:
            # Mode 0o666 less the umask, as a plainly written file gets (a temp file would be 0o600).
            fd = os.open(self._temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except OSError as exc:
            raise self.error(exc) from None
        self._out: IO[bytes] = os.fdopen(fd, "wb")

    def write(self, data: bytes) -> None:
        """Append `data` to the unfinished file.

        Raises:
            InputError: the write failed (disk full, ...).
        """
        try:
            self._out.write(data)
        except OSError as exc:
            raise self.error(exc) from None

    def publish(self) -> None:
        """Close the file and rename it to its destination.

        Raises:
            InputError: the file could not be flushed or renamed.
        """
        if self._temp is None:
            return
        try:
            self._out.close()
            os.replace(self._temp, self.destination)
        except OSError as exc:
            raise self.error(exc) from None
        self._temp = None

    def discard(self) -> None:
        """Remove the unfinished file (nothing happens after `publish`)."""
        if self._temp is not None:
            self._out.close()
            self._temp.unlink(missing_ok=True)
            self._temp = None

    def error(self, exc: OSError) -> InputError:
        """The one-line error naming the destination."""
        return InputError(f"{self.destination}: cannot write the {self._what}: {exc.strerror or exc}")
