"""SSH key-file problems are AuthenticationFailed naming the key and what is wrong (issue 20, item 6).

A missing, garbage or refused key used to read as ``HostUnreachable`` with a "check that sshd
runs" hint: the person then debugs the network. Each case here goes through the real loopback
sshd (its host key checked as always).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from toolkit.errors import AuthenticationFailed
from toolkit.host.host import Host
from toolkit.host.ssh import key_file_problem

pytestmark = pytest.mark.ssh
MakeSshHost = Callable[..., Host]  # the conftest's factory


def _connect_error(make_ssh_host: MakeSshHost, key: Path) -> AuthenticationFailed:
    host = make_ssh_host(key_filename=str(key))
    with pytest.raises(AuthenticationFailed) as caught:
        host.connect()
    return caught.value


def test_a_missing_key_file_is_named(make_ssh_host: MakeSshHost, tmp_path: Path) -> None:
    error = _connect_error(make_ssh_host, tmp_path / "id_missing")
    assert f"the key file {tmp_path / 'id_missing'} does not exist" in error.message
    assert error.hint and "key_filename=" in error.hint and "sshd runs" not in str(error)


def test_a_garbage_key_file_is_named(make_ssh_host: MakeSshHost, tmp_path: Path) -> None:
    garbage = tmp_path / "id_garbage"
    garbage.write_text("this is not a key\n")
    error = _connect_error(make_ssh_host, garbage)
    assert f"the key file {garbage} is not a private key paramiko can read" in error.message


def test_a_public_key_given_as_the_key_file_is_named(make_ssh_host: MakeSshHost, tmp_path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "k")], check=True)
    error = _connect_error(make_ssh_host, tmp_path / "k.pub")
    assert f"the key file {tmp_path / 'k.pub'} is not a private key" in error.message


def test_a_key_the_host_does_not_accept_is_named_with_its_fingerprint(make_ssh_host: MakeSshHost,
                                                                      tmp_path: Path) -> None:
    key = tmp_path / "id_stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    fingerprint = subprocess.run(["ssh-keygen", "-l", "-f", str(key)], capture_output=True, text=True,
                                 check=True).stdout.split()[1]
    error = _connect_error(make_ssh_host, key)
    assert "did not accept the key" in error.message and str(key) in error.message
    assert fingerprint in error.message
    assert error.hint and f"ssh-keygen -y -f {key}" in error.hint


def test_an_encrypted_key_without_its_passphrase_says_so(tmp_path: Path) -> None:
    key = tmp_path / "id_locked"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "s3cret-phrase", "-f", str(key)], check=True)
    assert "needs a passphrase" in (key_file_problem(str(key)) or "")
    assert key_file_problem(str(tmp_path)) == "is not a file"
