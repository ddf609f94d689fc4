"""The fork server's thread-free stdio (tb_engine.thinkingbox.mcp_forkserver): lines read from the
connection on the event loop, whole answers written back, and forked children that serve on their
one thread with stray prints kept off the wire."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import socket
import struct
from pathlib import Path

import pytest

from tb_engine.thinkingbox.mcp_forkserver import SocketLines, SocketWriter
from tb_engine.thinkingbox.mcp_pool import McpServerPool
from tests.engine.thinkingbox.test_mcp_launch import fork_pool  # noqa: F401 (fixture)
from tests.support.real_servers import server_config, servers_python


async def _read_all(sock: socket.socket) -> list[str]:
    return [line async for line in SocketLines(sock)]


def _lines_of(*chunks: bytes, reset: bool = False) -> list[str]:
    ours, theirs = socket.socketpair()
    ours.setblocking(False)

    async def scenario() -> list[str]:
        reading = asyncio.ensure_future(_read_all(ours))
        for chunk in chunks:
            theirs.sendall(chunk)
            await asyncio.sleep(0.01)  # each chunk arrives as a read of its own
        if reset:  # close with an RST instead of a FIN
            theirs.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        theirs.close()
        return await reading

    try:
        return asyncio.run(scenario())
    finally:
        ours.close()


def test_socket_lines_are_cut_at_newlines_whatever_the_reads_and_end_at_end_of_file():
    assert _lines_of(b'{"a": 1}\n{"b"', b": 2}\n", b"last without newline") == [
        '{"a": 1}\n',
        '{"b": 2}\n',
        "last without newline",
    ]


def test_socket_lines_decode_a_character_split_between_two_reads():
    assert _lines_of(b"caf\xc3", b"\xa9\n") == ["café\n"]


def test_socket_lines_longer_than_one_read_arrive_whole():
    big = json.dumps({"data_patch": ["x" * 1000] * 300}) + "\n"  # ~300 KB, several 64 KiB reads
    assert _lines_of(big.encode()[:100_000], big.encode()[100_000:], b'{"next": 1}\n') == [
        big,
        '{"next": 1}\n',
    ]


def test_an_undecodable_byte_is_replaced_as_the_sdk_reader_does():
    assert _lines_of(b"ok \xff\n") == ["ok \ufffd\n"]


def test_a_connection_reset_reads_as_end_of_file():
    assert _lines_of(b"whole\n", b"torn", reset=True) == ["whole\n", "torn"]


def test_socket_writer_sends_every_byte_of_an_answer_larger_than_the_socket_buffer():
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    answer = "é" * 2_000_000 + "\n"  # 4 MB: sock_sendall must wait for the reader

    async def scenario() -> bytes:
        loop = asyncio.get_running_loop()
        received = loop.run_in_executor(None, _receive_line, theirs)
        writer = SocketWriter(ours)
        await writer.write(answer)
        await writer.flush()
        return await received

    try:
        assert asyncio.run(scenario()).decode() == answer
    finally:
        ours.close()
        theirs.close()


def _receive_line(sock: socket.socket) -> bytes:
    chunks = []
    while not chunks or not chunks[-1].endswith(b"\n"):
        chunks.append(sock.recv(1 << 20))
    return b"".join(chunks)


def _threads_of(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


@pytest.fixture
def real_fork_pool():
    """The real neobank server forked (its SDK, mcp 1, neither diverts stdio nor serves it off threads)."""
    config = dataclasses.replace(server_config("sandbox_neobank_support_v1", servers_python()), start="fork")
    pool = McpServerPool(config, size=1)
    yield pool
    pool.close()


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="threads are counted in /proc")
def test_a_forked_real_thinkingbox_server_serves_calls_on_its_one_thread(real_fork_pool):
    """The SDK's threaded stdio would leave anyio's worker thread behind after the first read.
    (Our test server runs its sync tools in worker threads, so it cannot show this; the real
    ThinkingBox servers' tools are coroutines.)"""
    session = real_fork_pool.acquire()
    try:
        session.call("__reserved__init", {"config": {}})
        tools = [tool["name"] for tool in session.list_tools() if not tool["name"].startswith("__")]
        session.call("__reserved__geteffects", {})
        assert tools and _threads_of(session.process.pid) == 1
    finally:
        real_fork_pool.release(session)


def test_a_forked_child_takes_a_large_argument_and_answers_it_whole(fork_pool):
    session = fork_pool.acquire()
    subject = "Ünïcode " + "s" * 300_000
    try:
        session.call("__reserved__init", {"config": {"data_patch": {}}})
        created = json.loads(
            session.call("create_ticket", {"customer_id": "C-1", "subject": subject}).content[0].text
        )
        found = json.loads(session.call("get_ticket", {"ticket_id": created["id"]}).content[0].text)
        assert found["subject"] == subject
    finally:
        fork_pool.release(session)


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="descriptors are read in /proc")
def test_a_forked_child_keeps_stray_output_off_the_wire(real_fork_pool):
    """fd 0 reads the null device and fd 1 is stderr while the child serves: a handler's print()
    cannot tear a frame of the protocol, which runs over a descriptor of its own."""
    session = real_fork_pool.acquire()
    try:
        session.call("__reserved__init", {"config": {}})
        fds = Path(f"/proc/{session.process.pid}/fd")
        assert os.readlink(fds / "0") == os.devnull
        assert os.readlink(fds / "1") == os.readlink(fds / "2")
        assert os.readlink(fds / "2").startswith("pipe:")  # the per-attempt stderr the client reads
    finally:
        real_fork_pool.release(session)
