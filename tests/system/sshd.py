"""A real OpenSSH server on loopback for the tests: its own config, keys and known_hosts.

The toolkit is tested against ``sshd`` itself, not a mock of fabric: host-key checking,
jump hosts, channels and detached processes surviving the session all go through the
same code paths as on a GPU host. The server listens on 127.0.0.1, .2 and .3 (all of
127/8 is loopback on Linux) so that multi-host code sees three distinct hosts.
"""

from __future__ import annotations

import getpass
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from sim_process import free_port as _free_port

ADDRESSES = ("127.0.0.1", "127.0.0.2", "127.0.0.3")


def find_sshd() -> str | None:
    """The sshd binary (often in /usr/sbin, which is not on a normal user's PATH)."""
    found = shutil.which("sshd")
    if found:
        return found
    for candidate in ("/usr/sbin/sshd", "/usr/local/sbin/sshd", "/sbin/sshd"):
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def _keygen(path: Path, comment: str) -> str:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True,
        capture_output=True,
    )
    return path.with_suffix(".pub").read_text().strip()


_CONFIG = """\
Port {port}
{listen}
HostKey {root}/host_ed25519
AuthorizedKeysFile {root}/authorized_keys
PidFile none
StrictModes no
UsePAM no
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
AllowTcpForwarding yes
X11Forwarding no
PrintMotd no
PrintLastLog no
UseDNS no
MaxSessions 64
MaxStartups 64:30:128
LogLevel INFO
Subsystem sftp internal-sftp
"""


@dataclass
class LoopbackSshd:
    """A running ``sshd -D -e`` with everything a client needs to log in and check its key."""

    root: Path
    port: int
    process: subprocess.Popen[bytes]
    client_key: Path
    known_hosts: Path
    wrong_known_hosts: Path
    ssh_config: Path
    host_public_key: str
    user: str = field(default_factory=getpass.getuser)
    addresses: tuple[str, ...] = ADDRESSES

    @classmethod
    def start(cls, root: Path, sshd_path: str, *, attempts: int = 4) -> LoopbackSshd:
        root.mkdir(parents=True, exist_ok=True)
        host_pub = _keygen(root / "host_ed25519", "toolkit-test-host")
        impostor_pub = _keygen(root / "impostor_ed25519", "toolkit-test-impostor")
        client_pub = _keygen(root / "client_ed25519", "toolkit-test-client")
        (root / "authorized_keys").write_text(client_pub + "\n")
        (root / "ssh_config").write_text("# empty: the tests do not depend on ~/.ssh/config\n")
        last_log = ""
        for _ in range(attempts):
            port = _free_port()
            listen = "\n".join(f"ListenAddress {a}" for a in ADDRESSES)
            config = root / "sshd_config"
            config.write_text(_CONFIG.format(port=port, listen=listen, root=root))
            log = root / f"sshd-{port}.log"
            with log.open("wb") as sink:
                process = subprocess.Popen(
                    [sshd_path, "-D", "-e", "-f", str(config)],
                    stdout=sink,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                )
            if cls._wait_listening(process, log, port):
                known = root / "known_hosts"
                wrong = root / "known_hosts.wrong"
                known.write_text("".join(f"[{a}]:{port} {_key(host_pub)}\n" for a in ADDRESSES))
                wrong.write_text("".join(f"[{a}]:{port} {_key(impostor_pub)}\n" for a in ADDRESSES))
                return cls(
                    root, port, process, root / "client_ed25519", known, wrong, root / "ssh_config", host_pub
                )
            _terminate(process)
            last_log = log.read_text(errors="replace")
            missing = re.search(r"Missing privilege separation directory: (\S+)", last_log)
            if missing and os.geteuid() == 0:
                os.makedirs(missing.group(1), mode=0o755, exist_ok=True)  # absent in bare containers
        raise RuntimeError(f"sshd did not start on loopback after {attempts} attempts; its log:\n{last_log}")

    @staticmethod
    def _wait_listening(
        process: subprocess.Popen[bytes], log: Path, port: int, timeout_s: float = 10.0
    ) -> bool:
        deadline = time.monotonic() + timeout_s
        wanted = {f"Server listening on {a} port {port}." for a in ADDRESSES}
        while time.monotonic() < deadline:
            text = log.read_text(errors="replace")
            if all(line in text for line in wanted):
                return True
            if process.poll() is not None or "Bind to port" in text:
                return False
            time.sleep(0.02)
        return False

    def fingerprint(self) -> str:
        """SHA256 fingerprint of the host key, as ``ssh-keygen -l`` prints it."""
        out = subprocess.run(
            ["ssh-keygen", "-l", "-f", str(self.root / "host_ed25519.pub")],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        return out.split()[1]

    def log_text(self) -> str:
        return (self.root / f"sshd-{self.port}.log").read_text(errors="replace")

    def stop(self) -> None:
        _terminate(self.process)


def _key(public_line: str) -> str:
    kind, b64 = public_line.split()[:2]
    return f"{kind} {b64}"


def _terminate(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
