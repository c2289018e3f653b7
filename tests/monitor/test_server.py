"""The exporter's endpoint on loopback: TLS with a self-signed certificate, basic auth from
bcrypt hashes, and web config files that are wrong in the ways people get them wrong."""

from __future__ import annotations

import base64
import shutil
import socket
import ssl
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import bcrypt
import pytest
from prometheus_client.registry import CollectorRegistry

from gpunet.errors import UsageError
from gpunet.monitor import parse_listen
from gpunet.monitor.collectors import NodeView
from gpunet.monitor.exporter import GpunetCollector, node_collectors
from gpunet.monitor.server import ExporterServer, Limits, make_server
from gpunet.monitor.webconfig import BasicAuth, WebConfig, load_web_config

PASSWORD = "s3cret-scrape"
RECORDED = Path(__file__).parent.parent / "fixtures" / "sysfs" / "veth-pair"
needs_openssl = pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl missing (Debian package openssl)")


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl missing (Debian package openssl)")
    directory = tmp_path_factory.mktemp("tls")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=gpunet",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(directory / "key.pem"),
                    "-out", str(directory / "cert.pem")], check=True, capture_output=True)
    return directory / "cert.pem", directory / "key.pem"


def _hash(password: str) -> str:
    """A $2y$ hash, as htpasswd -B writes for exporter-toolkit (cost 4 keeps the test fast)."""
    return bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=4)).decode().replace("$2b$", "$2y$", 1)


def _web_config(tmp_path: Path, certificate: tuple[Path, Path]) -> Path:
    path = tmp_path / "web.yml"
    path.write_text(f"tls_server_config:\n  cert_file: {certificate[0]}\n  key_file: {certificate[1].name}\n"
                    f"basic_auth_users:\n  prometheus: '{_hash(PASSWORD)}'\n")
    shutil.copy(certificate[1], tmp_path / certificate[1].name)  # relative to the config file
    return path


@contextmanager
def serving(config: WebConfig, address: str = "127.0.0.1", limits: Limits | None = None) -> Iterator[ExporterServer]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(GpunetCollector(node_collectors(NodeView(root=RECORDED), False)))
    server = make_server(registry, address, 0, config, limits or Limits())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _get(url: str, context: ssl.SSLContext | None = None, user: str | None = None,
         password: str = "") -> tuple[int, str]:
    request = urllib.request.Request(url)
    if user is not None:
        request.add_header("Authorization", "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("WWW-Authenticate", "")


def test_tls_and_basic_auth(tmp_path: Path, certificate: tuple[Path, Path]) -> None:
    config = load_web_config(_web_config(tmp_path, certificate))
    trust = ssl.create_default_context(cafile=str(certificate[0]))
    with serving(config) as server:
        url = f"https://127.0.0.1:{server.server_address[1]}/metrics"
        status, body = _get(url, trust, "prometheus", PASSWORD)
        assert status == 200 and "gpunet_collector_success" in body
        assert _get(url, trust, "prometheus", PASSWORD)[0] == 200  # the remembered success
        assert _get(url, trust, "prometheus", "wrong") == (401, 'Basic realm="gpunet"')
        assert _get(url, trust, "nobody", PASSWORD)[0] == 401
        assert _get(url, trust)[0] == 401
        with pytest.raises((urllib.error.URLError, ConnectionError)):  # plain HTTP to TLS: no readable answer
            _get(url.replace("https", "http"))
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
            _get(url, ssl.create_default_context(), "prometheus", PASSWORD)  # not trusted: self-signed


def test_plain_http_without_a_config_and_only_metrics_served() -> None:
    with serving(WebConfig()) as server:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        assert _get(base + "/metrics")[0] == 200
        assert _get(base + "/")[0] == 200
        assert _get(base + "/etc/passwd")[0] == 404


@pytest.mark.parametrize(("text", "message"), [
    ("tls_server_config:\n  cert_file: c.pem\n", "key_file: Field required"),
    ("tls_server_config:\n  cert_file: nowhere.pem\n  key_file: k.pem\n", "cert_file: .*nowhere.pem is not a file"),
    ("basic_auth_user:\n  a: b\n", "basic_auth_user: Extra inputs are not permitted"),
    ("- a list\n", "expected a mapping"),
    ("tls_server_config: [\n", "not YAML"),
    ("tls_server_config:\n  cert_file: c.pem\n  key_file: k.pem\n  min_version: TLS9\n", "min_version"),
    ("basic_auth_users:\n  prometheus: plaintext-password\n", "basic_auth_users.prometheus: not a bcrypt hash"),
])
def test_a_bad_web_config_is_named_with_its_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "web.yml"
    path.write_text(text)
    (tmp_path / "c.pem").write_text("x")
    (tmp_path / "k.pem").write_text("x")
    with pytest.raises(UsageError, match=message):
        load_web_config(path)


def test_a_key_that_is_not_a_key_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "c.pem").write_text("not a certificate")
    (tmp_path / "k.pem").write_text("not a key")
    (tmp_path / "web.yml").write_text("tls_server_config:\n  cert_file: c.pem\n  key_file: k.pem\n")
    with pytest.raises(UsageError, match=r"c\.pem / .*k\.pem"):
        make_server(CollectorRegistry(), "127.0.0.1", 0, load_web_config(tmp_path / "web.yml"))


def test_basic_auth_rejects_malformed_headers() -> None:
    auth = BasicAuth({"u": _hash("p")})
    good = "Basic " + base64.b64encode(b"u:p").decode()
    assert auth.allows(good)
    for header in (None, "", "Bearer x", "Basic !!!", "Basic " + base64.b64encode(b"no-colon").decode(),
                   "Basic " + base64.b64encode(b"u:p2").decode()):
        assert not auth.allows(header), header
    assert BasicAuth({}).allows(None)  # no users configured: open, as exporter-toolkit


@pytest.mark.parametrize(("text", "expected"), [
    ("10.0.0.5:9842", ("10.0.0.5", 9842)), (":9842", ("::", 9842)), ("[::1]:9842", ("::1", 9842))])
def test_listen_addresses(text: str, expected: tuple[str, int]) -> None:
    assert parse_listen(text) == expected


@pytest.mark.parametrize("text", ["9842", "host:", "10.0.0.5:99999", "10.0.0.5:http"])
def test_bad_listen_addresses(text: str) -> None:
    with pytest.raises(UsageError, match="ADDRESS:PORT"):
        parse_listen(text)


def test_a_busy_port_is_a_clear_error() -> None:
    with serving(WebConfig()) as server, pytest.raises(UsageError, match=r"cannot listen on 127\.0\.0\.1"):
        make_server(CollectorRegistry(), "127.0.0.1", server.server_address[1], WebConfig())


def test_wrong_input_gets_401_never_a_dropped_connection() -> None:
    config = WebConfig(basic_auth_users={"prometheus": _hash(PASSWORD)})
    with serving(config) as server:
        url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
        assert _get(url, None, "prometheus", "x" * 100)[0] == 401  # bcrypt refuses > 72 bytes
        assert _get(url, None, "nobody", "x" * 100)[0] == 401
        assert _get(url, None, "prometheus", PASSWORD)[0] == 200


def test_head_answers_like_get_without_a_body() -> None:
    with serving(WebConfig(basic_auth_users={"prometheus": _hash(PASSWORD)})) as server:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        assert _head(base + "/metrics") == 401
        assert _head(base + "/metrics", "prometheus", PASSWORD) == 200
        assert _head(base + "/nothing", "prometheus", PASSWORD) == 404


def _head(url: str, user: str | None = None, password: str = "") -> int:
    request = urllib.request.Request(url, method="HEAD")
    if user is not None:
        request.add_header("Authorization", "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code


def test_an_idle_connection_is_closed() -> None:
    with serving(WebConfig(), limits=Limits(head_deadline_s=0.5)) as server, \
            socket.create_connection(("127.0.0.1", server.server_address[1])) as idle:
        idle.settimeout(30)  # a bound for a loaded host, not the deadline under test (0.5 s)
        assert idle.recv(1) == b""  # the server hung up on a client that said nothing


@pytest.mark.skipif(not socket.has_dualstack_ipv6(), reason="no dual-stack IPv6 here")
def test_all_addresses_means_ipv6_and_ipv4() -> None:
    with serving(WebConfig(), address="::") as server:
        port = server.server_address[1]
        assert _get(f"http://127.0.0.1:{port}/metrics")[0] == 200
        assert _get(f"http://[::1]:{port}/metrics")[0] == 200
