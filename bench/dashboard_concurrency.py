"""The dashboard under load: 200 simultaneous leaderboard and attempt-page requests against gunicorn.

Seeds the dashboard bench's PostgreSQL data (bench/dashboard_latency.py: 20 campaigns x 507 tasks x
N = 20, 202,800 attempts), starts gunicorn with docker/gunicorn.conf.py (the file docker/compose.yaml
runs; WEB_WORKERS / WEB_THREADS as there), signs one viewer in, then fires bursts of 200 requests at
once — half /leaderboard/, half attempt drilldowns /attempts/<id>/ — each burst released by one
barrier. The first burst meets cold caches (a fresh server); the later ones what viewers meet after.

The seeded campaigns' figures are stored first, as the end of each campaign stores them
(apps.figures.services.figures_refresh); the cold burst meets fresh processes with empty memory.

Run:  python3 bench/dashboard_concurrency.py                 # throwaway PostgreSQL cluster
      DATABASE_URL=postgres://... python3 bench/dashboard_concurrency.py
Options: --concurrency 200 --bursts 3 --campaigns 20 (a database seeded before is reused). The last line is machine-readable:
RESULT p50_ms=… p95_ms=… errors=… cold_p95_ms=… (p50/p95/errors over every burst)
"""

from __future__ import annotations

import argparse
import http.client
import os
import random
import re
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx2 as httpx  # the declared fork of httpx (pyproject.toml)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(ROOT / "bench"))
from dashboard_latency import CAMPAIGNS, percentile, seed, start_database, store_figures  # noqa: E402


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_gunicorn(database_url: str, port: int, data_dir: Path) -> subprocess.Popen:
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "TB_DEMO": "1",  # plain http on loopback, debug off: what a viewer's browser meets, minus TLS
        "TB_DATA_DIR": str(data_dir),
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "127.0.0.1",
        "WEB_BIND": f"127.0.0.1:{port}",
        "WEB_ACCESS_LOG": str(data_dir / "access.log"),
        "DJANGO_SETTINGS_MODULE": "thinkingbox_web.settings",
        "PYTHONPATH": str(ROOT),
    }
    command = [
        sys.executable,
        "-m",
        "gunicorn",
        "-c",
        str(ROOT / "docker" / "gunicorn.conf.py"),
        "thinkingbox_web.wsgi:application",
    ]
    log = (data_dir / "gunicorn.log").open("w")
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code in (200, 503):
                return process
        except httpx.HTTPError:
            time.sleep(0.3)
    process.kill()
    sys.exit(f"gunicorn did not answer within 60 s; see {data_dir / 'gunicorn.log'}")


def server_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) of gunicorn's master and workers so far: the burst's cost, whatever
    the machine's load (other processes slow the wall clock, not this)."""
    total = 0.0
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    for each in [pid, *map(int, children)]:
        try:
            fields = Path(f"/proc/{each}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def signed_in_cookies(base: str) -> dict[str, str]:
    with httpx.Client(base_url=base) as client:
        page = client.get("/accounts/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        done = client.post(
            "/accounts/login/",
            data={"username": "bench", "password": "bench-pw", "csrfmiddlewaretoken": token},
            headers={"Referer": f"{base}/accounts/login/"},
        )
        if done.status_code != 302:
            sys.exit(f"sign-in failed: HTTP {done.status_code}")
        return dict(client.cookies)


def burst(base: str, cookies: dict[str, str], paths: list[str]) -> tuple[list[float], list[str]]:
    """Every path requested at once (one thread and connection each, connected before the barrier,
    stdlib http.client so the load generator takes little of the CPU it shares); latencies in ms."""
    host, port = base.removeprefix("http://").split(":")
    cookie = "; ".join(f"{name}={value}" for name, value in cookies.items())
    barrier = threading.Barrier(len(paths))
    timings: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()

    def one(path: str) -> None:
        connection = http.client.HTTPConnection(host, int(port), timeout=120)
        connection.connect()
        barrier.wait()
        started = time.perf_counter()
        try:
            connection.request("GET", path, headers={"Cookie": cookie})
            response = connection.getresponse()
            response.read()
            problem = "" if response.status == 200 else f"{path}: HTTP {response.status}"
        except (OSError, http.client.HTTPException) as exc:
            problem = f"{path}: {type(exc).__name__}"
        elapsed = (time.perf_counter() - started) * 1000
        connection.close()
        with lock:
            timings.append(elapsed)
            if problem:
                errors.append(problem)

    threads = [threading.Thread(target=one, args=(path,)) for path in paths]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return timings, errors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=200, help="requests per burst (default 200)")
    parser.add_argument("--bursts", type=int, default=3, help="bursts, the first one cold (default 3)")
    parser.add_argument(
        "--campaigns", type=int, default=CAMPAIGNS, help="campaigns of 10,140 attempts (default 20)"
    )
    args = parser.parse_args()
    url, cluster = start_database()
    server = None
    try:
        os.environ["DATABASE_URL"] = url
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "thinkingbox_web.settings")
        import django

        django.setup()
        from django.core.management import call_command
        from django.db import connections

        from apps.attempts.models import Attempt

        call_command("migrate", verbosity=0)
        rng = random.Random(20251015)
        user, campaigns = seed(rng, args.campaigns)
        store_figures(campaigns)  # what the end of each campaign stored (apps.figures.services)
        attempt_ids = list(
            Attempt.objects.filter(campaign__in=campaigns[:5]).values_list("id", flat=True)[:5000]
        )
        connections.close_all()
        data_dir = Path(tempfile.mkdtemp(prefix="tb-bench-web-"))
        port = free_port()
        server = start_gunicorn(url, port, data_dir)
        base = f"http://127.0.0.1:{port}"
        cookies = signed_in_cookies(base)
        workers = os.environ.get("WEB_WORKERS") or os.cpu_count()
        threads = os.environ.get("WEB_THREADS", "4")
        print(f"gunicorn gthread, {workers} workers x {threads} threads (docker/gunicorn.conf.py)")
        print(f"load before: {Path('/proc/loadavg').read_text().strip()}")
        all_timings: list[float] = []
        all_errors: list[str] = []
        cold_p95 = 0.0
        for number in range(args.bursts):
            paths = [
                "/leaderboard/" if i % 2 == 0 else f"/attempts/{rng.choice(attempt_ids)}/"
                for i in range(args.concurrency)
            ]
            started, cpu_before = time.perf_counter(), server_cpu_s(server.pid)
            timings, errors = burst(base, cookies, paths)
            wall = time.perf_counter() - started
            cpu_ms = (server_cpu_s(server.pid) - cpu_before) * 1000 / len(paths)
            p95 = percentile(timings, 0.95)
            if number == 0:
                cold_p95 = p95
            print(
                f"burst {number + 1} ({'cold' if number == 0 else 'warm'}): {len(timings)} requests in {wall:.1f} s, "
                f"p50 {percentile(timings, 0.5):.0f} ms, p95 {p95:.0f} ms, max {max(timings):.0f} ms, "
                f"errors {len(errors)}, server CPU {cpu_ms:.1f} ms/request  load {Path('/proc/loadavg').read_text().split()[0]}"
            )
            for error in errors[:5]:
                print("  ", error)
            all_timings += timings
            all_errors += errors
        print(f"load after: {Path('/proc/loadavg').read_text().strip()}")
        print(
            f"RESULT p50_ms={percentile(all_timings, 0.5):.0f} p95_ms={percentile(all_timings, 0.95):.0f} "
            f"errors={len(all_errors)} cold_p95_ms={cold_p95:.0f}"
        )
        return 0
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
        if cluster is not None:
            from django.db import connections

            connections.close_all()
            cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
