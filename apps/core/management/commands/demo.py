"""`manage.py demo`: prepare demo data (registered steps), then serve on 127.0.0.1:8000 with a worker."""

from __future__ import annotations

import signal
import socket
import sys
import threading
import time

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from apps.core.demo import DemoContext, demo_steps
from apps.core.services import worker_heartbeat_forget
from thinkingbox_web.embedded import SupervisedWorker


class Command(BaseCommand):
    help = "Create demo data (login, later suites and campaigns) and serve the site locally."

    def add_arguments(self, parser):
        parser.add_argument("--no-serve", action="store_true", help="prepare the demo data, then exit")
        parser.add_argument(
            "--addrport", default="127.0.0.1:8000", help="where to serve (default 127.0.0.1:8000)"
        )
        parser.add_argument(
            "--no-worker", action="store_true", help="do not start a Celery worker beside the web server"
        )
        parser.add_argument(
            "--repeat", type=int, default=20, help="attempts per task in the demo campaigns (N)"
        )
        parser.add_argument("--no-campaigns", action="store_true", help="skip running the demo campaigns")

    def handle(
        self,
        *args,
        no_serve: bool,
        addrport: str,
        no_worker: bool,
        repeat: int,
        no_campaigns: bool,
        **options,
    ):
        if not (settings.DEBUG or settings.DEMO):
            raise CommandError(
                "demo creates a well-known login; refusing to run with DEBUG=0 outside the demo (TB_DEMO=1)"
            )
        context = DemoContext(out=self.stdout, options={"repeat": repeat, "no_campaigns": no_campaigns})
        steps = demo_steps()
        for number, step in enumerate(steps, start=1):
            self.stdout.write(f"[{number}/{len(steps)}] {step.name}")
            step.run(context)
        url = f"http://{addrport}/"
        self.stdout.write(self.style.SUCCESS("Demo ready."))
        self.stdout.write(f"URL: {url}")
        for note in context.notes:
            self.stdout.write(note)
        if no_serve:
            return
        self._serve(addrport, with_worker=not no_worker, reminder=[f"URL: {url}", *context.notes])

    def _remind_when_listening(self, addrport: str, lines: list[str]) -> None:
        """Print the URL and login again once the server answers: the server's and the worker's
        start-up banners would otherwise push them off the screen (issue 30)."""
        host, _, port = addrport.rpartition(":")

        def wait_then_print() -> None:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    with socket.create_connection((host or "127.0.0.1", int(port)), timeout=1):
                        break
                except OSError:
                    time.sleep(0.5)
            else:
                return
            time.sleep(1.0)  # after runserver's own lines
            self.stdout.write(self.style.SUCCESS("\nThe demo is serving. Open it and sign in:"))
            for line in lines:
                self.stdout.write(f"  {line}")

        threading.Thread(target=wait_then_print, name="demo-reminder", daemon=True).start()

    def _serve(self, addrport: str, *, with_worker: bool, reminder: list[str] | None = None) -> None:
        worker = None
        if with_worker:
            # Same task code as production; with the embedded broker it reads data/broker/. Supervised:
            # a worker that dies is started again, and pages say no worker is alive until it is ready.
            # It also sends the periodic tasks (heartbeat, sweep of lost attempts, drift ticks).
            worker = SupervisedWorker(
                pool="threads", concurrency=2, beat=True, on_exit=worker_heartbeat_forget
            ).start()
            self.stdout.write(f"Celery worker started (pid {worker.pid}), restarted if it dies.")
        # SIGTERM (e.g. from a process manager) must also reach the `finally` that stops the worker.
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
        if reminder:
            self._remind_when_listening(addrport, reminder)
        try:
            call_command("runserver", addrport, use_reloader=False)
        finally:
            if worker is not None:
                worker.stop(timeout=30)
