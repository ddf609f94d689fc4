"""The outbound URL policy: which endpoint hosts the engine may reach, checked after DNS and on redirects.

Real sockets on 127.0.0.x: a tiny HTTP server plays an internal service (an HTML admin page, a
redirect), and the OpenAI SDK client goes through the policy as a worker's would.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tb_engine.interfaces import InfraError
from tb_engine.llm import ChatClient, EndpointConfig, RetryPolicy
from tb_engine.llm.outbound import OutboundPolicy, install_policy

FAST = RetryPolicy(max_retries=2, base_delay_s=0.01, max_delay_s=0.02, timeout_s=5)
HELLO = [{"role": "user", "content": "hello"}]
SECRET_PAGE = b"<html>INTERNAL-ONLY admin console: password=hunter2</html>"


@contextmanager
def http_server(host: str, answer) -> Iterator[tuple[str, list[str]]]:
    """A server on host:<free port> answering every POST with answer(port) -> (status, headers, body)."""
    hits: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            hits.append(self.path)
            status, headers, body = answer(self.server.server_address[1])
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST  # a 302/303 redirect turns the POST into a GET

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer((host, 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{host}:{server.server_address[1]}/v1", hits
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def policy():
    """install(policy) for this test; the environment's policy comes back afterwards."""
    yield install_policy
    install_policy(None)


def _client(base_url: str) -> ChatClient:
    return ChatClient(EndpointConfig(model="m", base_url=base_url, api_key_env=None, retry=FAST))


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://127.0.0.1:6379/", "host 127.0.0.1 is a loopback address"),
        ("http://169.254.169.254/latest/meta-data/", "host 169.254.169.254 is a link-local address"),
        ("http://10.1.2.3/v1", "host 10.1.2.3 is a private address"),
        ("http://[::1]:8000/v1", "host ::1 is a loopback address"),
        ("http://[::ffff:127.0.0.1]/v1", "host ::ffff:127.0.0.1 is a loopback address"),
        ("http://0.0.0.0:6379/", "host 0.0.0.0 is an unspecified address"),
        ("http://localhost:6379/", "host localhost resolves to "),
        ("ftp://api.openai.com/", "'ftp://api.openai.com/' must be an http:// or https:// URL with a host"),
    ],
)
def test_default_policy_refuses_internal_hosts(url, problem):
    assert OutboundPolicy().url_refusal(url).startswith(problem)


def test_default_policy_allows_public_hosts_by_name_and_address():
    assert OutboundPolicy().url_refusal("https://8.8.8.8/v1") == ""
    assert OutboundPolicy().url_refusal("https://api.openai.com/v1", resolve=False) == ""


def test_listed_networks_addresses_and_exact_names_allow_internal_hosts_wildcards_do_not():
    policy = OutboundPolicy.of(["10.0.0.0/8", "127.0.0.1", "localhost", "*.example.com"])

    assert policy.url_refusal("http://10.9.9.9:8000/v1") == ""
    assert policy.url_refusal("http://127.0.0.1:8000/v1") == ""
    assert policy.address_refusal("localhost", "127.0.0.1") == ""
    assert policy.address_refusal("vllm.example.com", "192.168.1.5").startswith(
        "host vllm.example.com resolves to 192.168.1.5, a private address"
    )
    assert policy.url_refusal("https://api.openai.com/v1") == (
        "host api.openai.com is not in TB_OUTBOUND_ALLOWED_HOSTS (10.0.0.0/8, 127.0.0.1, localhost, *.example.com)"
    )


def test_policy_reads_the_environment_variable():
    policy = OutboundPolicy.from_env({"TB_OUTBOUND_ALLOWED_HOSTS": " API.openai.com, 10.0.0.0/8 ,"})

    assert policy.allowed == ("api.openai.com", "10.0.0.0/8")
    assert OutboundPolicy.from_env({}).allowed == ("*",)


def test_client_refuses_a_loopback_endpoint_before_any_request(policy):
    policy(OutboundPolicy.of(["*"]))
    with http_server("127.0.0.1", lambda port: (200, {}, b"{}")) as (base_url, hits):
        with pytest.raises(InfraError) as caught:
            _client(base_url).complete(HELLO)

    assert "outbound policy: host 127.0.0.1 is a loopback address" in str(caught.value)
    assert hits == []


def test_client_refuses_a_redirect_to_an_address_the_policy_does_not_list(policy):
    policy(OutboundPolicy.of(["127.0.0.1"]))  # 127.0.0.2 is loopback too, but not listed
    with http_server("127.0.0.2", lambda port: (200, {}, SECRET_PAGE)) as (inside, inside_hits):
        redirect = (307, {"Location": f"{inside}/chat/completions"}, b"")
        with http_server("127.0.0.1", lambda port: redirect) as (outside, outside_hits):
            with pytest.raises(InfraError) as caught:
                _client(outside).complete(HELLO)

    assert "outbound policy: host 127.0.0.2 is a loopback address" in str(caught.value)
    assert (outside_hits, inside_hits) == (["/v1/chat/completions"], [])


def test_a_non_json_answer_is_described_never_quoted(policy):
    policy(OutboundPolicy.of(["127.0.0.1"]))
    page = (200, {"Content-Type": "text/html"}, SECRET_PAGE)
    with http_server("127.0.0.1", lambda port: page) as (base_url, _):
        with pytest.raises(InfraError) as caught:
            _client(base_url).complete(HELLO)

    message = str(caught.value)
    assert "response body is not JSON (58 bytes, content-type text/html)" in message
    assert "INTERNAL" not in message and "hunter2" not in message


def test_an_http_error_keeps_a_json_message_short_and_never_an_html_body(policy):
    policy(OutboundPolicy.of(["127.0.0.1"]))
    long_message = {"error": {"message": "model 'm' not found\n" + "x" * 500}}
    import json

    with http_server("127.0.0.1", lambda port: (404, {"Content-Type": "text/html"}, SECRET_PAGE)) as (
        html,
        _,
    ):
        with pytest.raises(InfraError) as as_html:
            _client(html).complete(HELLO)
    body = json.dumps(long_message).encode()
    with http_server("127.0.0.1", lambda port: (404, {"Content-Type": "application/json"}, body)) as (js, _):
        with pytest.raises(InfraError) as as_json:
            _client(js).complete(HELLO)

    assert str(as_html.value).endswith("HTTP 404: no JSON error message (58 bytes, content-type text/html)")
    assert "INTERNAL" not in str(as_html.value)
    assert str(as_json.value).endswith("HTTP 404: model 'm' not found " + "x" * 180 + "…")
