"""No MCP server process outlives the process that owns its pool (a worker killed with SIGKILL)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

OWNER = r"""
import sys, time
from tb_engine.thinkingbox.mcp_config import McpServerConfig
from tb_engine.thinkingbox.mcp_pool import pool_for
# A server that lingers once its stdio is closed, as one busy in a long tool call does.
LINGERING = "import runpy, time; runpy.run_module('tests.support.tb_mcp_server', run_name='__main__'); time.sleep(600)"
held = []
for start, args in (("fork", ("-m", "tests.support.tb_mcp_server")), ("spawn", ("-c", LINGERING))):
    config = McpServerConfig(command=sys.executable, args=args, cwd=sys.argv[1], start=start)
    pool = pool_for(config, size=2)
    held.append(pool.acquire())  # one server busy with an attempt, two more ready, per pool
print("ready", flush=True)
time.sleep(600)
"""


def _descendants(pid: int) -> set[int]:
    found, stack = set(), [pid]
    while stack:
        parent = stack.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children = (task / "children").read_text().split()
            except OSError:
                continue
            for child in map(int, children):
                if child not in found:
                    found.add(child)
                    stack.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_sigkilled_owner_leaves_no_server_process(tmp_path):
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(ROOT)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert owner.stdout is not None and owner.stdout.readline().strip() == "ready"
        servers = _descendants(owner.pid)
        assert len(servers) >= 6  # fork server + 3 forked children, 3 spawned servers

        owner.send_signal(signal.SIGKILL)
        owner.wait()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(_alive(pid) for pid in servers):
            time.sleep(0.1)

        assert sorted(pid for pid in servers if _alive(pid)) == []
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
        for pid in _descendants(owner.pid) if owner.poll() is None else ():
            os.kill(pid, signal.SIGKILL)
