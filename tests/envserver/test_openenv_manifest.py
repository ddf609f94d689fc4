"""The OpenEnv manifest (tb_envserver/openenv.yaml) and the env image (docker/envserver.Dockerfile):
openenv-core's own manifest loader and runtime validator accept them, and they name the real entry
point and port."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import yaml
from openenv import GenericEnvClient
from openenv.auto._discovery import _create_env_info_from_package, _load_manifest_from_package
from openenv.cli._validation import validate_running_environment

from tb_engine.loader import load_builtin_suite
from tb_engine.training import Environment
from tb_envserver import EnvServer
from tb_envserver.__main__ import parser

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "tb_envserver" / "openenv.yaml"
DOCKERFILE = ROOT / "docker" / "envserver.Dockerfile"


def manifest() -> dict:
    return yaml.safe_load(MANIFEST.read_text())


def test_openenv_loader_reads_the_manifest_from_the_package_resources():
    assert _load_manifest_from_package("openenv-tb_envserver", "tb_envserver") == manifest()


def test_openenv_discovery_resolves_our_client_class_and_it_drives_a_live_server():
    info = _create_env_info_from_package("openenv-tb_envserver", "tb_envserver", "1.0")
    assert (info.env_key, info.name, info.spec_version) == ("thinkingbox", "thinkingbox_env", 1)
    assert (info.client_module_path, info.client_class_name) == ("tb_envserver.client", "ThinkingboxEnv")
    client_class = info.get_client_class()
    assert issubclass(client_class, GenericEnvClient)
    server = EnvServer(Environment(load_builtin_suite()))
    server.start_background()
    try:
        with client_class(base_url=server.url).sync() as env:
            result = env.reset(task_id="retail/ticket_hold_carrier_exception")
            assert result.observation["metadata"]["task_id"] == "retail/ticket_hold_carrier_exception"
            assert env.step({"text": "All done.", "done": True}).reward == 0.0
    finally:
        server.shutdown_all()


def test_manifest_names_the_real_entry_point_port_and_image():
    data = manifest()
    module_name, attr = data["app"].split(":")
    assert callable(getattr(importlib.import_module(module_name), attr))
    assert data["port"] == parser().get_default("port") == 8765
    assert data["command"].split()[:3] == ["python", "-m", "tb_envserver"]
    assert parser().parse_args(data["command"].split()[3:]).port == data["port"]
    assert (ROOT / data["image"]) == DOCKERFILE


def test_env_image_exposes_the_manifest_port_and_runs_the_entry_point():
    text = DOCKERFILE.read_text()
    data = manifest()
    assert re.findall(r"^EXPOSE (\d+)$", text, re.M) == [str(data["port"])]
    (cmd,) = re.findall(r"^CMD (.+)$", text, re.M)
    assert cmd.startswith("exec python -m tb_envserver --host 0.0.0.0 --port 8765 --suite ")
    assert "/health" in text
    for line in re.findall(r"^COPY (.+)$", text, re.M):  # every file the image copies exists
        for source in line.split()[:-1]:
            assert (ROOT / source).exists(), source
    assert data["variables"]["TB_ENVSERVER_SUITE"] in re.findall(r"TB_ENVSERVER_SUITE=(\w+)", text)


def test_openenv_runtime_validator_passes_on_a_live_server():
    server = EnvServer(Environment(load_builtin_suite()))
    server.start_background()
    try:
        report = validate_running_environment(server.url)
    finally:
        server.shutdown_all()
    failed = [c["id"] for c in report["criteria"] if not c["passed"]]
    assert failed == []
    assert (report["passed"], report["mode"]) == (True, "simulation")
