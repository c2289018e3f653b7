"""The exporter's web config, in the Prometheus exporter-toolkit format (the file
node_exporter's --web.config.file reads), so one file serves both: TLS from tls_server_config,
basic auth from bcrypt hashes in basic_auth_users. Impossible settings are refused at start."""

from __future__ import annotations

import hashlib
import hmac
import re
import ssl
import threading
from base64 import b64decode
from pathlib import Path
from typing import Annotated, Any, Literal

import bcrypt
import yaml
from pydantic import Field, StringConstraints, ValidationError

from gpunet.errors import SpecError, UsageError
from gpunet.files.yamldoc import load_limited, read_document
from gpunet.model.base import Frozen

TLS_VERSIONS = {"TLS10": ssl.TLSVersion.TLSv1, "TLS11": ssl.TLSVersion.TLSv1_1,
                "TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3}
CLIENT_AUTH = {"NoClientCert": ssl.CERT_NONE, "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
               "RequireAndVerifyClientCert": ssl.CERT_REQUIRED}
BCRYPT_HASH = re.compile(r"\$2[abxy]?\$\d{2}\$[./A-Za-z0-9]{53}")
# bcrypt's own minimum is 4; one check takes 0.9 s here at 14 and about 15 s at 18: longer than a scrape.
BCRYPT_COSTS = (4, 14)


class TlsServerConfig(Frozen):
    cert_file: Path
    key_file: Path
    client_auth_type: Literal["NoClientCert", "VerifyClientCertIfGiven", "RequireAndVerifyClientCert"] = \
        "NoClientCert"
    client_ca_file: Path | None = None
    min_version: Literal["TLS10", "TLS11", "TLS12", "TLS13"] = "TLS12"
    max_version: Literal["TLS10", "TLS11", "TLS12", "TLS13"] | None = None


# A header sent with every response: a token for a name, visible ASCII for a value (a CR or LF
# would end the header block and let the config write the response).
HeaderName = Annotated[str, StringConstraints(pattern=r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$")]
HeaderValue = Annotated[str, StringConstraints(pattern=r"^[ -~]{0,1024}$")]


class HttpServerConfig(Frozen):
    headers: dict[HeaderName, HeaderValue] = Field(default_factory=dict)


class WebConfig(Frozen):
    tls_server_config: TlsServerConfig | None = None
    http_server_config: HttpServerConfig = HttpServerConfig()
    basic_auth_users: dict[str, str] = Field(default_factory=dict)  # user -> bcrypt hash


def load_web_config(path: Path) -> WebConfig:
    """Read and check the file; relative certificate paths are relative to it (as exporter-toolkit does)."""
    data = _read_yaml(path)
    try:
        config = WebConfig.model_validate(data)
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(p) for p in problem["loc"])
        raise UsageError(f"{path}: {where}: {problem['msg']}") from None
    for user, digest in config.basic_auth_users.items():
        if not BCRYPT_HASH.fullmatch(digest):
            raise UsageError(f"{path}: basic_auth_users.{user}: not a bcrypt hash (make one with "
                             f"`htpasswd -nBC 10 {user}`, the part after the colon)")
        cost = int(digest.split("$")[2])
        if not BCRYPT_COSTS[0] <= cost <= BCRYPT_COSTS[1]:
            raise UsageError(f"{path}: basic_auth_users.{user}: bcrypt cost {cost} is outside "
                             f"{BCRYPT_COSTS[0]}-{BCRYPT_COSTS[1]} (each check at cost {cost} takes "
                             f"{'too long for a scrape' if cost > BCRYPT_COSTS[1] else 'no time: too weak'}); "
                             f"htpasswd -nBC 10 {user}")
    return _resolved(config, path.parent)


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        _, data = load_limited(read_document(path, "web config"))
    except SpecError as exc:
        raise UsageError("\n".join(map(str, exc.problems))) from None
    except yaml.YAMLError as exc:
        raise UsageError(f"{path}: not YAML: {exc}") from None
    if data is not None and not isinstance(data, dict):
        raise UsageError(f"{path}: expected a mapping of tls_server_config, http_server_config, basic_auth_users")
    return data or {}


def _resolved(config: WebConfig, base: Path) -> WebConfig:
    tls = config.tls_server_config
    if tls is None:
        return config
    paths = {key: base / value for key in ("cert_file", "key_file", "client_ca_file")
             if (value := getattr(tls, key)) is not None}
    for key, value in paths.items():
        if not value.is_file():
            raise UsageError(f"tls_server_config.{key}: {value} is not a file")
    return config.model_copy(update={"tls_server_config": tls.model_copy(update=paths)})


def tls_context(tls: TlsServerConfig) -> ssl.SSLContext:
    """The server's TLS context; settings no handshake could satisfy are refused here, at start,
    instead of every handshake failing later."""
    if tls.max_version and TLS_VERSIONS[tls.max_version] < TLS_VERSIONS[tls.min_version]:
        raise UsageError(f"tls_server_config: min_version {tls.min_version} is above max_version {tls.max_version}; "
                         "no client could connect")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(tls.cert_file, tls.key_file)
    except ssl.SSLError as exc:
        raise UsageError(f"{tls.cert_file} / {tls.key_file}: {exc.reason or exc}") from None
    context.minimum_version = TLS_VERSIONS[tls.min_version]
    if tls.max_version:
        context.maximum_version = TLS_VERSIONS[tls.max_version]
    context.verify_mode = CLIENT_AUTH[tls.client_auth_type]
    if tls.client_auth_type != "NoClientCert":
        if tls.client_ca_file is None:
            raise UsageError(f"tls_server_config: client_auth_type {tls.client_auth_type} needs client_ca_file")
        try:
            context.load_verify_locations(tls.client_ca_file)
        except ssl.SSLError as exc:
            raise UsageError(f"tls_server_config.client_ca_file: {tls.client_ca_file} holds no CA certificate "
                             f"({exc.reason or exc})") from None
    return context


class BasicAuth:
    """Checks `Authorization: Basic` against bcrypt hashes; a success is remembered (as a keyed
    digest, not the password) so a scrape every 15 s does not pay bcrypt's deliberate cost. An
    unknown user is checked against a dummy hash of the same cost, so timing does not tell which
    users exist."""

    def __init__(self, users: dict[str, str]) -> None:
        self.users = {name: digest.encode() for name, digest in users.items()}
        self._key = hashlib.sha256(repr(sorted(users.items())).encode()).digest()
        self._accepted: set[bytes] = set()
        self._lock = threading.Lock()
        cost = int(next(iter(users.values())).split("$")[2]) if users else 4
        self._dummy = bcrypt.hashpw(b"gpunet: no such user", bcrypt.gensalt(rounds=cost))

    def allows(self, header: str | None) -> bool:
        if not self.users:
            return True
        user, password = _basic_credentials(header)
        if user is None:
            return False
        token = hmac.new(self._key, f"{user}:{password}".encode(), hashlib.sha256).digest()
        with self._lock:
            if token in self._accepted:
                return True
        if not _checkpw(password, self.users.get(user, self._dummy)) or user not in self.users:
            return False
        with self._lock:
            self._accepted.add(token)
        return True


def _checkpw(password: str, digest: bytes) -> bool:
    """False, not an exception, for what bcrypt refuses (a password over 72 bytes)."""
    try:
        return bcrypt.checkpw(password.encode(), digest)
    except ValueError:
        return False


def _basic_credentials(header: str | None) -> tuple[str | None, str]:
    scheme, _, encoded = (header or "").partition(" ")
    if scheme.lower() != "basic":
        return None, ""
    try:
        user, sep, password = b64decode(encoded.strip(), validate=True).decode().partition(":")
    except (ValueError, UnicodeDecodeError):
        return None, ""
    return (user, password) if sep else (None, "")
