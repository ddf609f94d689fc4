"""Reading a server's hash rules from its own declarations: the probe, its cache, the hash rule.

A small server package written to a temporary folder follows the ThinkingBox convention (marker
classes with ``extract_names`` / ``has_unstable_extras``, a module-level system whose ``db`` maps
model classes to table names); the probe runs it with our own interpreter, as it runs the real
servers with theirs (tests/engine/thinkingbox/test_effects.py covers those).
"""

from __future__ import annotations

import hashlib
import json
import sys
import textwrap

import pytest

from tb_engine.interfaces import InfraError
from tb_engine.thinkingbox import declarations as decl
from tb_engine.thinkingbox.declarations import (
    ServerDeclarations,
    TableDeclaration,
    declarations_for_launch,
    probe_target,
    server_declarations,
)

MARKERS = """
class UnstableField:
    @classmethod
    def extract_names(cls, model_cls):
        return [n for n, f in model_cls.model_fields.items() if any(isinstance(m, cls) for m in f.metadata)]


class UnstableExtraFields:
    @classmethod
    def has_unstable_extras(cls, model_cls):
        return getattr(model_cls, "unstable_extra_fields", False) is True
"""

SERVER = """
from typing import Annotated, ClassVar

from pydantic import BaseModel, ConfigDict

from fakesrv.markers import UnstableField


class Ticket(BaseModel):
    id: str
    status: str
    subject: Annotated[str, UnstableField()]
    updated_at: str


class Item(BaseModel):
    model_config = ConfigDict(extra="allow")
    unstable_extra_fields: ClassVar[bool] = True
    id: str
    name: str


class Db:
    _model_cls_to_stem = {Ticket: "tickets", Item: "items"}


class System:
    db = Db()


system = System()
print("server noise on stdout must not reach the probe's answer")
"""


@pytest.fixture
def package(tmp_path, monkeypatch):
    root = tmp_path / "src"
    (root / "fakesrv").mkdir(parents=True)
    (root / "fakesrv" / "__init__.py").write_text("")
    (root / "fakesrv" / "markers.py").write_text(MARKERS)
    (root / "fakesrv" / "mcp_fake.py").write_text(textwrap.dedent(SERVER))
    monkeypatch.setenv(decl.CACHE_ENV, str(tmp_path / "cache"))
    decl.forget_memo()
    yield root
    decl.forget_memo()


def test_server_declarations_read_each_table_from_the_server_markers(package):
    found = server_declarations(sys.executable, "fakesrv.mcp_fake", cwd=str(package))
    assert found.tables == {
        "tickets": TableDeclaration(
            frozenset({"subject"}), frozenset({"id", "status", "subject", "updated_at"})
        ),
        "items": TableDeclaration(frozenset(), frozenset({"id", "name"}), unstable_extra_fields=True),
    }
    assert found.source.startswith("declarations of fakesrv.mcp_fake (UnstableField / unstable_extra_fields)")
    # Fields outside an unstable_extra_fields model's schema are unstable; the clock stamp is not.
    assert found.unstable_columns("items", ["id", "name", "Priority"]) == frozenset({"Priority"})
    assert found.unstable_columns("tickets", ["id", "status", "subject", "updated_at"]) == frozenset(
        {"subject"}
    )


def test_server_declarations_are_cached_by_package_content_hash(package, tmp_path):
    first = server_declarations(sys.executable, "fakesrv.mcp_fake", cwd=str(package))
    [cached] = list((tmp_path / "cache").glob("fakesrv.mcp_fake-*.json"))
    data = json.loads(cached.read_text())
    data["source"] = "read from the cache"
    cached.write_text(json.dumps(data))
    decl.forget_memo()
    again = server_declarations(sys.executable, "fakesrv.mcp_fake", cwd=str(package))
    assert (again.source, again.tables, again.package_hash) == (
        "read from the cache",
        first.tables,
        first.package_hash,
    )
    # Any change to the package's files is a new version: probed afresh.
    (package / "fakesrv" / "markers.py").write_text(MARKERS + "\n# changed\n")
    decl.forget_memo()
    changed = server_declarations(sys.executable, "fakesrv.mcp_fake", cwd=str(package))
    assert changed.package_hash != first.package_hash
    assert changed.source.startswith("declarations of fakesrv.mcp_fake")


def test_server_declarations_of_a_module_that_does_not_import_is_an_infra_error(package):
    with pytest.raises(InfraError) as caught:
        server_declarations(sys.executable, "fakesrv.no_such_server", cwd=str(package))
    message = str(caught.value)
    assert message.startswith(
        f"could not read the declarations of fakesrv.no_such_server with {sys.executable} (exit 1)"
    )
    assert "No module named 'fakesrv.no_such_server'" in message


def test_declarations_for_launch_needs_a_python_module_command():
    assert probe_target("python -m pkg.mcp_shop") == ("python", "pkg.mcp_shop")
    assert probe_target("/venv/bin/python", ["-m", "pkg.mcp_shop"]) == ("/venv/bin/python", "pkg.mcp_shop")
    assert probe_target("./server --stdio") is None
    assert declarations_for_launch("./server --stdio").source == (
        "none: launch command './server --stdio' is not '<python> -m <module>'"
    )


def test_state_hash_follows_the_servers_rule():
    declared = ServerDeclarations({"tickets": TableDeclaration(frozenset({"subject"}))})
    state = {
        "tickets": [
            {"id": "2", "subject": "b", "tags": ["z", "a"], "items": [{"k": 2}, {"k": 1}]},
            {"id": "1", "subject": "a", "tags": []},
        ]
    }
    stable = {
        "tickets": [{"id": "1", "tags": []}, {"id": "2", "tags": ["a", "z"], "items": [{"k": 2}, {"k": 1}]}]
    }
    expected = hashlib.sha256(json.dumps(stable, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    assert declared.stable_state(state) == stable
    assert declared.state_hash(state) == expected
