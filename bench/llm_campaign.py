"""A real-model campaign at full scale: the real ThinkingBox servers behind an endpoint that answers in seconds.

The shared ThinkingBox tasks of retail and booking (98 + 119), repeated to ``--attempts`` (2,170 by
default: 10 per task), on the real servers (../shared/thinkingbox/servers, in their own venv), through
real ``celery -A thinkingbox_web worker`` processes on PostgreSQL + Redis (throwaway ones unless
DATABASE_URL / CELERY_BROKER_URL point at them). The agent is an ``openai`` agent whose endpoint is
bench/golden_endpoint.py on 127.0.0.1: it replays each task's golden trajectory, one call per chat
request, after ``--latency`` seconds per call; the LLM user simulator asks the same endpoint and
closes the dialogue after the agent's closing reply. So an attempt is golden-call-count + 2 chat
calls, each waiting ``--latency`` seconds — a real model is slower.

Printed, measured over the steady part of the run (from 10 % to 90 % of the attempts recorded):

* in flight: attempts running at once (median of samples of the attempt rows in status running);
* attempts/s: attempts recorded per second of wall time;
* % of ideal: attempts/s ÷ (in flight ÷ (chat calls per attempt × latency)): how much of the time
  in flight an attempt spends waiting on its model rather than on the worker;
* memory per attempt in flight: PSS (proportional set size, /proc/<pid>/smaps_rollup) summed over
  the worker process trees (worker, fork servers, server processes), so copy-on-write pages shared
  by the forked servers count once; the median sample divided by the attempts in flight then;
* CPU seconds per attempt: user + system time of those trees (live and reaped processes) over the
  steady part, divided by the attempts recorded in it.

The endpoint stands in for a model on another machine: it runs at a lower priority (nice 10), so
that with ``--latency 0`` its own parsing of the requests takes as little as it can of the 2 cores
the workers are measured on.

``--golden`` first runs the same tasks with the in-process golden agent (no endpoint) on the same
workers: its CPU seconds per attempt is the reference for "CPU-bound at ≤ 1.25 × golden".

Goals on 2 cores (issue 25): ≥ 256 in flight, ≥ 80 % of ideal or CPU-bound at ≤ 1.25 × golden CPU
per attempt, ≤ 40 MB per attempt in flight, 0 infra errors, every verdict equal to the server hash.

Run:  python3 bench/llm_campaign.py [--latency 1.0] [--attempts 2170] [--workers 2] [--concurrency 160]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# The scripted model server runs on loopback, which the outbound policy refuses unless listed
# (tb_engine.llm.outbound); worker processes inherit the variable.
os.environ.setdefault("TB_OUTBOUND_ALLOWED_HOSTS", "*,127.0.0.1,localhost,::1")
sys.path.insert(0, str(ROOT / "bench"))

from campaign_throughput import django_on_services, node_name, start_worker, stop, wait_ready  # noqa: E402
from thinkingbox_servers import import_suite, shared_dataset  # noqa: E402

import run as project_runner  # noqa: E402  (free ports)
from apps.worker.memory import process_tree, tree_pss_mb  # noqa: E402  (no Django needed)

CLK_TCK = os.sysconf("SC_CLK_TCK")


# --- process trees: CPU and PSS --------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """utime + stime of the process and of its reaped children (cutime + cstime)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(fields[i]) for i in (11, 12, 13, 14)) / CLK_TCK


def trees_cpu(roots: list[int]) -> float:
    """CPU of every live process in the trees plus what their reaped children used (counted by parents)."""
    return sum(cpu_seconds(pid) for root in roots for pid in process_tree(root))


def trees_pss(roots: list[int]) -> float:
    return sum(tree_pss_mb(root) for root in roots)


class Sampler(threading.Thread):
    """Every ``every_s``: attempts recorded and running, PSS and CPU of the worker trees."""

    def __init__(self, campaign_id: int, roots: list[int], every_s: float = 2.0) -> None:
        super().__init__(daemon=True)
        self.campaign_id, self.roots, self.every_s = campaign_id, roots, every_s
        self.samples: list[dict] = []
        self.finished = threading.Event()
        self.cpu_gone = 0.0  # CPU of processes that ended (and were reaped outside the trees) is lost

    def run(self) -> None:
        from django.db import connection

        from apps.attempts.models import Attempt

        try:
            while not self.finished.is_set():
                rows = Attempt.objects.filter(campaign_id=self.campaign_id)
                counts = {"done": 0, "running": 0, "infra_error": 0}
                for status in rows.values_list("status", flat=True):
                    counts[status] = counts.get(status, 0) + 1
                recorded = sum(n for status, n in counts.items() if status not in ("queued", "running"))
                self.samples.append(
                    {
                        "t": time.monotonic(),
                        "recorded": recorded,
                        "running": counts["running"],
                        "pss_mb": trees_pss(self.roots),
                        "cpu_s": trees_cpu(self.roots),
                        "worker_cpu_s": sum(cpu_seconds(root) for root in self.roots),
                    }
                )
                self.finished.wait(self.every_s)
        finally:
            connection.close()


def steady(samples: list[dict], total: int) -> list[dict]:
    """The samples between 10 % and 90 % of the attempts recorded."""
    return [s for s in samples if 0.1 * total <= s["recorded"] <= 0.9 * total]


# --- the run ---------------------------------------------------------------------------------


def trajectories(suite, path: Path) -> float:
    """Write the endpoint's {query: golden calls}; return the mean golden calls per task."""
    from apps.worker.selectors import task_spec_of

    mapping: dict[str, list] = {}
    lengths = []
    for task in suite.tasks.all():
        spec = task_spec_of(task)
        calls = [[call.tool, call.arguments] for call in spec.golden]
        lengths.append(len(calls))
        known = mapping.get(spec.query)
        if known is None:
            mapping[spec.query] = calls
        elif known and isinstance(known[0][0], list):
            known.append(calls)
        elif known != calls:
            mapping[spec.query] = [known, calls]
    path.write_text(json.dumps(mapping))
    return statistics.mean(lengths)


def endpoint_stats(port: int, reset: bool = False) -> dict:
    url = f"http://127.0.0.1:{port}/stats" + ("?reset" if reset else "")
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def run_campaign(args, env, label: str, create, log_dir: Path) -> dict:
    from apps.campaigns.services import campaign_start

    logs = [log_dir / f"{label}-worker-{n}.log" for n in range(args.workers)]
    workers = [start_worker(env, log, pool=args.pool, concurrency=args.concurrency) for log in logs]
    try:
        wait_ready([node_name(log) for log in logs])
        time.sleep(args.settle)
        campaign = create()
        total = args.total
        sampler = Sampler(campaign.pk, [worker.pid for worker in workers])
        started = time.monotonic()
        sampler.start()
        campaign_start(campaign=campaign)
        from apps.campaigns.services import campaigns_wait

        if not campaigns_wait([campaign.pk], timeout=args.timeout, sweep_every=15, poll_s=0.5):
            raise SystemExit(f"{label}: campaign {campaign.pk} did not finish within {args.timeout:.0f} s")
        elapsed = time.monotonic() - started
        sampler.finished.set()
        sampler.join()
    finally:
        for worker in workers:
            stop(worker)
    return figures(label, campaign, total, elapsed, sampler.samples)


def figures(label: str, campaign, total: int, elapsed: float, samples: list[dict]) -> dict:
    from apps.attempts.models import Attempt

    window = steady(samples, total)
    if len(window) < 2:
        window = samples
    first, last = window[0], window[-1]
    span = max(last["t"] - first["t"], 1e-9)
    recorded = max(last["recorded"] - first["recorded"], 1)
    attempts = list(Attempt.objects.filter(campaign=campaign).select_related("task__domain"))
    verdicts_equal = state_passed = 0
    for attempt in attempts:
        if attempt.status != "done":
            continue
        effects = (attempt.result or {}).get("extra", {}).get("thinkingbox", {}).get("effects", {})
        compared = effects.get(attempt.task.domain.name) or {}
        theirs, ours = compared.get("their_hash_pass"), compared.get("our_state_pass")
        # The state part of the verdict (rubrics aside) against the server's own hash verdict.
        verdicts_equal += theirs is not None and bool(theirs) == bool(ours)
        state_passed += bool(theirs)
    in_flight = statistics.median(s["running"] for s in window)
    return {
        "label": label,
        "total": total,
        "elapsed": elapsed,
        "per_s": recorded / span,
        "in_flight": in_flight,
        "pss_mb": statistics.median(s["pss_mb"] for s in window),
        "cpu_s_per_attempt": (last["cpu_s"] - first["cpu_s"]) / recorded,
        # The worker processes alone (without fork servers and attempts' server processes).
        "worker_cpu_s_per_attempt": (last["worker_cpu_s"] - first["worker_cpu_s"]) / recorded,
        "infra_errors": sum(a.status == "infra_error" for a in attempts),
        "passed": sum(a.verdict == "pass" for a in attempts),
        "verdicts_equal": verdicts_equal,
        "state_passed": state_passed,
        "errors": sorted({a.error[:160] for a in attempts if a.status == "infra_error"})[:5],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=1.0, help="seconds per chat call")
    parser.add_argument("--attempts", type=int, default=2170, help="at least this many attempts")
    parser.add_argument("--workers", type=int, default=2, help="worker processes")
    parser.add_argument("--pool", default="threads")
    parser.add_argument("--concurrency", type=int, default=160, help="attempts in flight per worker process")
    parser.add_argument("--window", type=int, default=512, help="the campaign's window (attempts in flight)")
    parser.add_argument("--pool-size", type=int, default=4, help="ready servers per domain and worker")
    parser.add_argument(
        "--golden", action="store_true", help="first run the golden agent for the CPU reference"
    )
    parser.add_argument(
        "--golden-window", type=int, default=0, help="the golden campaign's window (default: its agent's)"
    )
    parser.add_argument("--golden-only", action="store_true", help="stop after the golden campaign")
    parser.add_argument("--settle", type=float, default=8.0)
    parser.add_argument("--timeout", type=float, default=3600.0)
    args = parser.parse_args()

    from tests.support.servers_venv import ServersUnavailable, servers_python

    try:
        python = servers_python()
    except ServersUnavailable as exc:
        raise SystemExit(f"the real servers are needed: {exc}") from None
    stack: list = []
    scratch = Path(tempfile.mkdtemp(prefix="tb-bench-llm-"))
    endpoint = None
    load = os.getloadavg()
    try:
        # Before Django starts here too: this process dispatches the campaign's first window.
        os.environ["TB_CAMPAIGN_MAX_WINDOW"] = str(args.window)
        env, owner, team = django_on_services(stack, scratch)
        from apps.agents.models import AgentConfig
        from apps.agents.services import agent_config_for
        from apps.campaigns.services import campaign_create

        suite = import_suite(python, shared_dataset(scratch / "dataset"), args.pool_size)
        tasks = list(suite.tasks.order_by("task_id"))
        per_task = math.ceil(args.attempts / len(tasks))
        args.total = per_task * len(tasks)
        golden_calls = trajectories(suite, scratch / "golden.json")
        calls_per_attempt = golden_calls + 2  # the closing reply, and the user simulator's closing line
        port = project_runner.free_port()
        endpoint = subprocess.Popen(
            [
                "nice",
                "-n",
                "10",
                sys.executable,
                str(ROOT / "bench/golden_endpoint.py"),
                "--port",
                str(port),
                "--latency",
                str(args.latency),
                "--trajectories",
                str(scratch / "golden.json"),
            ],
            stdout=(scratch / "endpoint.log").open("ab"),
            stderr=subprocess.STDOUT,
        )
        base_url = f"http://127.0.0.1:{port}/v1"
        print(
            f"{len(tasks)} tasks x {per_task} = {len(tasks) * per_task} attempts; {golden_calls:.2f} golden "
            f"calls per task, {calls_per_attempt:.2f} chat calls per attempt at {args.latency} s; workers "
            f"{args.workers} x {args.pool} {args.concurrency}; load before {load[0]:.2f}",
            flush=True,
        )
        results = {}
        if args.golden or args.golden_only:
            golden_agent = agent_config_for("golden")
            if args.golden_window:
                golden_agent.max_concurrency = args.golden_window
                golden_agent.save(update_fields=["max_concurrency"])
            results["golden"] = run_campaign(
                args,
                env,
                "golden",
                lambda: campaign_create(
                    name="bench golden",
                    team=team,
                    owner=owner,
                    agent=golden_agent,
                    suite=suite,
                    n_attempts=per_task,
                    window=args.window,
                ),
                scratch,
            )
            report(results["golden"], None)
            if args.golden_only:
                golden = results["golden"]
                print(
                    f"RESULT golden_in_flight={golden['in_flight']:.0f} golden_attempts_per_s={golden['per_s']:.2f} "
                    f"golden_cpu_s_per_attempt={golden['cpu_s_per_attempt']:.3f} "
                    f"golden_worker_cpu_s_per_attempt={golden['worker_cpu_s_per_attempt']:.3f}"
                )
                return
        agent, _ = AgentConfig.objects.update_or_create(
            name="bench golden-replay endpoint",
            defaults={
                "kind": AgentConfig.Kind.OPENAI,
                "model": "golden-replay",
                "base_url": base_url,
                "api_key_env": "",
                "max_concurrency": args.window,
                "parameters": {"retry": {"timeout_s": 60 + 10 * args.latency}},
            },
        )
        user = {"kind": "llm", "model": "golden-replay-user", "base_url": base_url, "api_key_env": ""}
        llm = run_campaign(
            args,
            env,
            "llm",
            lambda: campaign_create(
                name="bench llm",
                team=team,
                owner=owner,
                agent=agent,
                suite=suite,
                n_attempts=per_task,
                window=args.window,
                user_simulator=user,
            ),
            scratch,
        )
        stats = endpoint_stats(port)
        report(llm, calls_per_attempt * args.latency)
        print(f"endpoint: {stats}", flush=True)
    finally:
        if endpoint is not None:
            endpoint.terminate()
        for service in reversed(stack):
            service.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    ideal = llm["in_flight"] / (calls_per_attempt * args.latency) if args.latency else float("nan")
    pct = 100.0 * llm["per_s"] / ideal if args.latency else float("nan")
    per_attempt_mb = llm["pss_mb"] / max(llm["in_flight"], 1)
    golden_note = ""
    if "golden" in results:
        ratio = llm["cpu_s_per_attempt"] / max(results["golden"]["cpu_s_per_attempt"], 1e-9)
        golden_note = (
            f" golden_cpu_s_per_attempt={results['golden']['cpu_s_per_attempt']:.3f} cpu_ratio={ratio:.2f}"
        )
    print(f"load after {os.getloadavg()[0]:.2f}", flush=True)
    print(
        f"RESULT in_flight={llm['in_flight']:.0f} attempts_per_s={llm['per_s']:.2f} pct_of_ideal={pct:.0f} "
        f"rss_per_attempt_mb={per_attempt_mb:.1f} cpu_s_per_attempt={llm['cpu_s_per_attempt']:.3f} "
        f"infra_errors={llm['infra_errors']} verdicts_equal={llm['verdicts_equal']}/{llm['total']}{golden_note}"
    )


def report(found: dict, ideal_latency: float | None) -> None:
    ideal = found["in_flight"] / ideal_latency if ideal_latency else None
    pct = f", {100 * found['per_s'] / ideal:.0f}% of ideal" if ideal else ""
    print(
        f"{found['label']}: {found['total']} attempts in {found['elapsed']:.1f} s; steady {found['per_s']:.2f}/s "
        f"with {found['in_flight']:.0f} in flight{pct}; PSS {found['pss_mb']:.0f} MB "
        f"({found['pss_mb'] / max(found['in_flight'], 1):.1f} MB per attempt in flight); "
        f"CPU {found['cpu_s_per_attempt']:.3f} s per attempt ({found['worker_cpu_s_per_attempt']:.3f} in the "
        f"worker processes); {found['infra_errors']} infra errors; "
        f"{found['passed']} passed, {found['state_passed']} with the golden end state; state verdict equal to the server hash {found['verdicts_equal']}/{found['total']}",
        flush=True,
    )
    for error in found["errors"]:
        print(f"  infra error: {error}", flush=True)


if __name__ == "__main__":
    main()
