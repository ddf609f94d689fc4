"""The embedded broker: kombu's filesystem transport with whole messages only.

Kombu's own transport writes a message straight into its final ``*.msg`` name, and a reader
moves and parses any ``*.msg`` it lists: a reader that lists a file still being written gets half
a message, and its ``JSONDecodeError`` is an "Unrecoverable error" that ends the worker (its
campaigns then wait forever). Here a message is written under a name no reader picks up and
renamed into place once whole (a rename within one folder is atomic), and a file that still does
not parse (a crash mid-write of an older version, a hand-made file) is set aside in the
``rejected_folder`` with a warning instead of stopping the worker.

Selected by ``CELERY_BROKER_TRANSPORT`` when ``CELERY_BROKER_URL`` is ``filesystem://``.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import uuid
from queue import Empty
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.json import dumps, loads

log = logging.getLogger(__name__)

WRITING_SUFFIX = ".writing"  # never ends in ".<queue>.msg": readers skip files being written


class Channel(filesystem.Channel):
    """Writes each message whole (temporary name, then rename); sets unreadable ones aside."""

    @property
    def rejected_folder(self) -> str:
        folder = self.transport_options.get("rejected_folder") or os.path.join(
            self.data_folder_in, "..", "rejected"
        )
        os.makedirs(folder, exist_ok=True)
        return folder

    def _put(self, queue: str, payload: dict[str, Any], **kwargs: Any) -> None:  # type: ignore[override]  # as kombu's
        name = f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = final + WRITING_SUFFIX
        try:
            with open(partial, "wb") as handle:
                handle.write(dumps(payload).encode())
                handle.flush()
                os.fsync(handle.fileno())  # a power cut must not leave a whole-looking empty file
            os.rename(partial, final)
        except OSError as exc:
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc

    def _get(self, queue: str, timeout: float | None = None) -> Any:
        wanted = f"{queue}.msg"
        for name in sorted(os.listdir(self.data_folder_in)):
            if name.partition(".")[2] != wanted:
                continue
            taken = os.path.join(tempfile.gettempdir(), f"tb-broker-{os.getpid()}-{name}")
            try:
                # Whoever moves the file first owns the message (other consumers skip it).
                shutil.move(os.path.join(self.data_folder_in, name), taken)
            except OSError:
                continue
            try:
                with open(taken, "rb") as handle:
                    payload = handle.read()
            except OSError as exc:
                raise ChannelError(f"Cannot read file {taken!r} from queue.") from exc
            try:
                message = loads(payload.decode())
            except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError alike
                self._set_aside(taken, name, exc)
                continue
            os.remove(taken)
            return message
        raise Empty()

    def _set_aside(self, path: str, name: str, error: Exception) -> None:
        target = os.path.join(self.rejected_folder, name)
        try:
            shutil.move(path, target)
        except OSError:
            target = "(could not be kept)"
            os.remove(path)
        log.warning(
            "broker message %s is not a whole JSON message (%s); set aside as %s", name, error, target
        )


class Transport(filesystem.Transport):
    Channel = Channel
