"""A big ``tb infer`` results file imported as one campaign: rows/s and peak RSS (memory must stay flat).

Usage: python3 bench/import_tb_results.py [--rows 1000000] [--tasks 5000]

Generates a JSONL file of ``--rows`` rows (~650 bytes each, as a real tb infer file of a million
rows is about 651 MB): ``--tasks`` tests in 50 scenario files, rows/tasks repetitions each, one
tool call and its response per row, passes and failures mixed. Then imports it the way
``manage.py import_tb_results`` does (``apps.thinkingbox.services.tb_results_import``) into the
database of DATABASE_URL, or into SQLite under a temporary TB_DATA_DIR when it is not set.
Goals (issue 27): peak RSS <= 500 MB at >= 5,000 rows/s on 2 cores. Rows are parsed in worker
processes (TB_IMPORT_WORKERS): the importer's peak RSS, the largest worker's, and the peak PSS of
the whole tree (shared pages counted once) are reported.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def tb_row(task: int, repetition: int) -> dict:
    """One small but complete tb infer row (system, user, a tool call and its answer, the final reply)."""
    passed = (task * 7 + repetition) % 3 != 0
    call_id = f"call_{task}_{repetition}"
    return {
        "uid": f"scenario_{task % 50}.py:test_case_{task}",
        "messages": [
            {"T": "Text", "metadata": {}, "role": "system", "content": "You are an AI Agent."},
            {"T": "Text", "metadata": {}, "role": "user", "content": f"Append a line to file {task}.txt"},
            {
                "T": "ParallelToolCall",
                "metadata": {},
                "tool_calls": [
                    {
                        "T": "ToolCall",
                        "metadata": {"error": None},
                        "name": "get_text_content",
                        "arguments": {"path": f"Documents/{task}.txt"},
                        "id": call_id,
                    }
                ],
            },
            {
                "T": "ToolResponse",
                "metadata": {},
                "name": "get_text_content",
                "content": '{"status": "ok", "text_content": "some text"}',
                "id": call_id,
            },
            {
                "T": "Text",
                "metadata": {"tag": "text", "is_done": True},
                "role": "assistant",
                "content": "Done.",
            },
        ],
        "test_result": {"result": passed, "reward": 1.0 if passed else 0.0, "is_system_error": False},
        "usage": [{"input_tokens": 1339, "output_tokens": 73, "total_tokens": 1412}],
        "metadata": {"scenario": f"scenario_{task % 50}", "agent": "bench", "repetition": repetition},
        "is_system_error": False,
        "finish_reason": "done",
    }


def write_results_file(path: Path, *, rows: int, tasks: int) -> int:
    """Write ``rows`` rows (test by test, repetitions in order); returns the file's size in bytes."""
    repetitions = -(-rows // tasks)
    with path.open("w", encoding="utf-8") as handle:
        written = 0
        for task in range(tasks):
            for repetition in range(repetitions):
                if written == rows:
                    break
                handle.write(json.dumps(tb_row(task, repetition)) + "\n")
                written += 1
    return path.stat().st_size


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux


class TreePssPeak:
    """The largest PSS of this process and its children (the import's worker processes), sampled each second."""

    def __init__(self) -> None:
        self.peak_mb = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        from apps.worker.memory import tree_pss_mb

        while not self._stop.wait(1.0):
            self.peak_mb = max(self.peak_mb, tree_pss_mb())

    def __enter__(self) -> TreePssPeak:
        self._thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self._stop.set()
        self._thread.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--tasks", type=int, default=5000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tb-import-bench-") as tmp:
        if not os.environ.get("DATABASE_URL"):
            os.environ["TB_DATA_DIR"] = str(Path(tmp) / "data")
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "thinkingbox_web.settings")
        import django  # after the data folder is chosen

        django.setup()
        from django.contrib.auth import get_user_model
        from django.core.management import call_command
        from django.db import connection

        from apps.core.models import Team
        from apps.thinkingbox.services import tb_results_import

        call_command("migrate", verbosity=0)
        team, _ = Team.objects.get_or_create(slug="bench-import", defaults={"name": "Bench import"})
        owner, _ = get_user_model().objects.get_or_create(username="bench-import")
        team.members.add(owner)
        path = Path(tmp) / "results.jsonl"
        size = write_results_file(path, rows=args.rows, tasks=args.tasks)
        print(f"file: {args.rows} rows, {args.tasks} tests, {size / 1e6:.0f} MB ({connection.vendor})")
        rss_before = peak_rss_mb()
        tree = TreePssPeak()
        started = time.perf_counter()
        with tree:
            report = tb_results_import(
                path=path, campaign_name=f"bench import {time.time():.0f}", team=team, owner=owner
            )
        elapsed = time.perf_counter() - started
        assert report.attempts == args.rows
        rate = args.rows / elapsed
        peak = peak_rss_mb()
        print(f"import: {report.attempts} attempts in {elapsed:.1f} s ({rate:.0f} rows/s)")
        # The worker processes that parse rows (apps/thinkingbox/results_rows.py) are forks of this
        # one: most of their pages are this process's, shared; their own peak is reported apart.
        workers_peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(f"peak RSS: {peak:.0f} MB (before the import: {rss_before:.0f} MB)")
        print(f"largest worker process peak RSS: {workers_peak:.0f} MB (shared pages included)")
        print(
            f"peak PSS of the process tree (importer + workers, shared pages counted once): {tree.peak_mb:.0f} MB"
        )
        print(f"load: {Path('/proc/loadavg').read_text().strip()} on {os.cpu_count()} cores")
        print(
            f"RESULT rows_per_s={rate:.0f} peak_rss_mb={peak:.0f} worker_peak_rss_mb={workers_peak:.0f} "
            f"tree_peak_pss_mb={tree.peak_mb:.0f}"
        )


if __name__ == "__main__":
    main()
