"""Opening SSH connections the careful way: fabric's config, our host-key policy, clear errors.

Fabric accepts any unknown host key by default (``AutoAddPolicy``, fabric#1804, #2071): a man in
the middle, or the wrong machine after an IP was reassigned, would get our commands. Here every
connection, each ProxyJump hop included, refuses unknown keys unless ``trust_on_first_use`` is
passed explicitly (then the key is recorded, like OpenSSH's ``accept-new``). Paramiko's exceptions
become :mod:`toolkit.errors` types that say what to do.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import paramiko
from fabric import Config, Connection

from toolkit.errors import AuthenticationFailed, ChangedHostKey, HostUnreachable, ToolkitError, UnknownHostKey

__all__ = ["SshSettings", "build_connection", "open_connection", "close_connection", "chain",
           "translate_connect_error", "DEFAULT_KNOWN_HOSTS"]

DEFAULT_KNOWN_HOSTS = "~/.ssh/known_hosts"
SYSTEM_KNOWN_HOSTS = "/etc/ssh/ssh_known_hosts"
KEEPALIVE_S = 30  # idle notebooks sit for hours; NAT and firewalls drop silent connections
_LOG = logging.getLogger("toolkit.ssh.transport")
_LOG.addHandler(logging.NullHandler())


@dataclass(frozen=True)
class SshSettings:
    """Everything needed to (re)open one SSH connection; values as the user gave them."""

    hostname: str
    user: str | None = None
    port: int | None = None
    key_filename: str | None = None
    known_hosts: str | None = None
    trust_on_first_use: bool = False
    connect_timeout_s: float = 10.0
    ssh_config: str | None = None

    def __post_init__(self) -> None:  # wrong input fails here, naming the argument (issue 25: port=70000 passed)
        if not isinstance(self.hostname, str) or not self.hostname or any(c.isspace() for c in self.hostname):
            raise ValueError(f"Host(hostname={self.hostname!r}): a host name or address without spaces, "
                             "like 'gpu-a' or '10.0.0.5' (the user goes in user=..., the port in port=...)")
        if self.port is not None and (not isinstance(self.port, int) or isinstance(self.port, bool)
                                      or not 0 < self.port < 65536):
            raise ValueError(f"Host(port={self.port!r}): the SSH port is an integer 1-65535 (None: 22 or ~/.ssh/config)")
        if not isinstance(self.connect_timeout_s, int | float) or not self.connect_timeout_s > 0:
            raise ValueError(f"Host(connect_timeout_s={self.connect_timeout_s!r}): positive seconds")


def _key_file_kind(key_type: str) -> str:
    """``ssh-ed25519`` -> ``ed25519``, ``ecdsa-sha2-nistp256`` -> ``ecdsa``: sshd's host key file names."""
    return next((kind for kind in ("ed25519", "ecdsa", "rsa", "dss") if kind in key_type), key_type)


class _CheckedPolicy(paramiko.MissingHostKeyPolicy):
    """Reject unknown host keys with the fingerprint and the command to trust them, or record them."""

    def __init__(self, known_hosts: Path, trust_on_first_use: bool, port: int) -> None:
        self.known_hosts = known_hosts
        self.trust_on_first_use = trust_on_first_use
        self.port = port
        self._lock = threading.Lock()

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        bare = hostname[1:].rsplit("]:", 1)[0] if hostname.startswith("[") else hostname
        keyscan = f"ssh-keyscan {bare}" if self.port == 22 else f"ssh-keyscan -p {self.port} {bare}"
        if not self.trust_on_first_use:
            raise UnknownHostKey(
                f"{hostname} offered a host key ({key.get_name()}) that is not in {self.known_hosts}; "
                "the toolkit never trusts an unknown host key silently",
                host=bare, evidence=[f"offered key fingerprint: {key.fingerprint}"],
                hint=(f"check that fingerprint with the host's owner (on the host: ssh-keygen -lf "
                      f"/etc/ssh/ssh_host_{_key_file_kind(key.get_name())}_key.pub), then run "
                      f"`{keyscan} >> {self.known_hosts}`; or pass trust_on_first_use=True "
                      "to record the key on first contact"))
        with self._lock:
            client.get_host_keys().add(hostname, key.get_name(), key)
            self.known_hosts.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            with self.known_hosts.open("a", encoding="ascii") as f:
                f.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")


def _fabric_config(settings: SshSettings) -> Config:
    # Connect-time values live in the fabric config so that ProxyJump hops (which fabric
    # builds from a clone of it) use the same key file and timeouts.
    timeout = settings.connect_timeout_s
    connect_kwargs: dict[str, object] = {"timeout": timeout, "banner_timeout": timeout,
                                         "auth_timeout": timeout}
    if settings.key_filename:
        connect_kwargs["key_filename"] = [os.path.expanduser(settings.key_filename)]
    ssh_config = None if settings.ssh_config is None else os.path.expanduser(settings.ssh_config)
    return Config(overrides={"connect_kwargs": connect_kwargs}, runtime_ssh_path=ssh_config)


def _harden(connection: Connection, settings: SshSettings) -> None:
    """Replace fabric's AutoAddPolicy on a connection and each of its gateway hops."""
    known = settings.known_hosts or connection.ssh_config.get("userknownhostsfile", DEFAULT_KNOWN_HOSTS)
    path = Path(os.path.expanduser(str(known).split()[0]))
    client = connection.client
    client.get_host_keys().clear()
    if path.exists():
        client.load_host_keys(str(path))
    if settings.known_hosts is None and os.path.exists(SYSTEM_KNOWN_HOSTS):
        client.load_system_host_keys(SYSTEM_KNOWN_HOSTS)  # clusters often distribute host keys there
    client._host_keys_filename = None  # paramiko would rewrite the whole file on save; we append
    policy = _CheckedPolicy(path, settings.trust_on_first_use, int(connection.port))
    client.set_missing_host_key_policy(policy)
    client.set_log_channel(_LOG.name)  # paramiko logs handshake tracebacks; our errors say it better
    connection.connect_timeout = None  # ours is in connect_kwargs (fabric truncates to whole seconds)
    if isinstance(connection.gateway, Connection):
        _harden(connection.gateway, settings)


def build_connection(settings: SshSettings, gateway: Connection | None = None) -> Connection:
    """A fabric Connection (not yet open) honouring ssh_config, with host keys checked."""
    connection = Connection(settings.hostname, user=settings.user, port=settings.port,
                            config=_fabric_config(settings), gateway=gateway)
    _harden(connection, settings)
    return connection


def describe(connection: Connection) -> str:
    return f"{connection.user}@{connection.host}:{connection.port}"


def key_file_problem(path: str) -> str | None:
    """What is wrong with a private key file (None: paramiko can load it), in words for an error: paramiko's
    own errors for a missing or garbage key read as "cannot reach the host" (issue 20)."""
    full = os.path.expanduser(path)
    if not os.path.exists(full):
        return "does not exist"
    if not os.path.isfile(full):
        return "is not a file"
    try:
        paramiko.PKey.from_path(full)
    except PermissionError:
        return "cannot be read by this user (check its owner and mode: 0600, yours)"
    except (paramiko.SSHException, ValueError, OSError, IndexError, TypeError) as exc:
        # OpenSSH-format keys say so through cryptography's TypeError, PEM ones through paramiko's own.
        if isinstance(exc, paramiko.PasswordRequiredException) or "password" in str(exc).lower():
            return ("is encrypted and needs a passphrase: load it into ssh-agent (`ssh-add PATH`) and drop "
                    "key_filename=")
        return f"is not a private key paramiko can read ({type(exc).__name__}: {exc})".replace(" ()", "")
    return None


def _fingerprint(path: str) -> str:
    key = paramiko.PKey.from_path(os.path.expanduser(path))
    return f"{key.get_name()} {key.fingerprint}"


def _key_error(exc: BaseException, connection: Connection, where: str, via: str) -> AuthenticationFailed | None:
    """AuthenticationFailed naming the key file and what is wrong with it, when a key file is the cause."""
    if not isinstance(exc, paramiko.AuthenticationException | paramiko.SSHException | FileNotFoundError
                      | PermissionError):
        return None
    keys = connection.connect_kwargs.get("key_filename") or []
    keys = [keys] if isinstance(keys, str) else [str(k) for k in keys]
    hint = ("fix key_filename= (or IdentityFile in ~/.ssh/config): a private key whose public half is in "
            "~/.ssh/authorized_keys of that user; `ssh -i KEY -p PORT USER@HOST true` should work")
    problems = [(key, problem) for key in keys if (problem := key_file_problem(key)) is not None]
    if problems:
        key, problem = problems[0]
        return AuthenticationFailed(f"cannot log in to {where}{via}: the key file {key} {problem}",
                                    host=str(connection.host), evidence=[f"{type(exc).__name__}: {exc}"], hint=hint)
    if isinstance(exc, paramiko.AuthenticationException) and keys:
        shown = ", ".join(f"{key} ({_fingerprint(key)})" for key in keys)
        return AuthenticationFailed(
            f"{where}{via} refused our credentials: it did not accept the key {shown}", host=str(connection.host),
            evidence=[f"{type(exc).__name__}: {exc}"],
            hint=f"add its public half (`ssh-keygen -y -f {keys[0]}`) to ~/.ssh/authorized_keys of "
                 f"{connection.user} on {connection.host}, or pass the key that is there")
    return None


def translate_connect_error(exc: BaseException, connection: Connection, timeout_s: float) -> ToolkitError:
    """Turn what paramiko/socket raised while connecting into an error that says what to do."""
    if isinstance(exc, ToolkitError):
        return exc
    where = describe(connection)
    host = str(connection.host)
    via = " (through its gateway)" if connection.gateway else ""
    key_error = _key_error(exc, connection, where, via)
    if key_error is not None:
        return key_error
    if isinstance(exc, paramiko.BadHostKeyException):
        name = host if int(connection.port) == 22 else f"[{host}]:{connection.port}"
        return ChangedHostKey(
            f"{where} presented a different {exc.key.get_name()} host key than the one recorded; "
            "this may be another machine answering at that address", host=host,
            evidence=[f"offered:  {exc.key.fingerprint}", f"recorded: {exc.expected_key.fingerprint}"],
            hint=("if the host was reinstalled or its key legitimately rotated, remove the old entry with "
                  f"`ssh-keygen -R '{name}'` (add -f FILE for a known_hosts other than ~/.ssh/known_hosts) "
                  "and trust the new one after checking its fingerprint"))
    said = [f"{type(exc).__name__}: {exc}"]
    if isinstance(exc, paramiko.AuthenticationException):
        return AuthenticationFailed(
            f"{where} refused our credentials{via}", host=host, evidence=said,
            hint=("check user=, key_filename= (or IdentityFile in ~/.ssh/config), that the public key is in "
                  "~/.ssh/authorized_keys of that user, and that `ssh` with the same settings works"))
    if isinstance(exc, socket.gaierror):
        return HostUnreachable(f"cannot resolve the address of {where}", host=host, evidence=[str(exc)],
                               hint="check the hostname, or add a Host entry with HostName to ~/.ssh/config")
    if isinstance(exc, (TimeoutError, socket.timeout)) or (
            isinstance(exc, paramiko.SSHException) and "banner" in str(exc).lower()):
        return HostUnreachable(
            f"{where} did not answer as an SSH server within {timeout_s:g} s{via}", host=host, evidence=said,
            hint="check that the host is up, the port is right and no firewall drops the traffic; "
                 "raise connect_timeout_s for a slow link")
    if isinstance(exc, (OSError, EOFError, paramiko.SSHException)):
        return HostUnreachable(
            f"cannot open an SSH session to {where}{via}", host=host, evidence=said,
            hint="check that sshd runs on that host and port (`ssh -p PORT USER@HOST true` should work)")
    return HostUnreachable(f"unexpected failure connecting to {where}", host=host, evidence=[repr(exc)])


def chain(connection: Connection) -> list[Connection]:
    """The connection and its gateway hops, outermost first."""
    links = [connection]
    while isinstance(links[-1].gateway, Connection):
        links.append(links[-1].gateway)
    return links


def close_connection(connection: Connection) -> None:
    """Close a connection and every hop (fabric's close() skips a client that never finished connecting)."""
    for link in chain(connection):
        link.client.close()
        link.close()


def open_connection(connection: Connection, timeout_s: float) -> None:
    """Open ``connection`` (and its hops) or raise a :mod:`toolkit.errors` error; never half-open."""
    started = time.monotonic()
    try:
        connection.open()
        for link in chain(connection):
            if link.transport is not None:
                link.transport.set_keepalive(KEEPALIVE_S)
    except Exception as exc:
        # the hop that failed is the deepest one not connected (hops open innermost first)
        failed = [link for link in chain(connection) if not link.is_connected][-1]
        live = failed.client.get_transport()
        inner = live.get_exception() if live is not None else None  # what the transport thread saw
        close_connection(connection)
        if time.monotonic() - started >= 0.9 * timeout_s and not isinstance(exc, ToolkitError):
            exc = inner or TimeoutError(f"no SSH handshake within {timeout_s:g} s ({exc})")
        raise translate_connect_error(exc, failed, timeout_s) from exc
