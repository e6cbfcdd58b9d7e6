"""The users file (``router/security/users.py``): hashes only, plain entries refused with the file and
line, and SCRAM checked with ``scramp``'s client against the router's side; and which SASL
mechanisms a connection is offered (``router/security/authn.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from once.router.amqp.sasl import SaslStep
from once.router.config import Auth
from once.router.security.authn import client_sasl, offered
from once.router.security.users import SCRAM, UsersError, add_user, check_plain, entry, load_users, remove_user, scram_exchange
from scramp import ScramClient


def _users(tmp_path: Path, **passwords: str) -> Path:
    path = tmp_path / "users.yaml"
    for name, pw in passwords.items():
        add_user(path, name, pw)
    return path


def test_the_file_holds_hashes_that_check_the_password_and_no_password(tmp_path):
    path = _users(tmp_path, alice="correct horse", bob="battery")
    assert "correct horse" not in path.read_text() and "battery" not in path.read_text()
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    users = load_users(path)
    assert set(users) == {"alice", "bob"} and set(users["alice"].secrets) == set(SCRAM)
    assert check_plain(users["alice"], "correct horse")
    assert not check_plain(users["alice"], "battery") and not check_plain(None, "x")


def test_a_plain_entry_is_refused_naming_the_file_and_line(tmp_path):
    path = tmp_path / "users.yaml"
    path.write_text(yaml.safe_dump({"alice": entry("pw")}) + "bob: hunter2\n")
    with pytest.raises(UsersError) as e:
        load_users(path)
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if text.startswith("bob:"))
    assert str(e.value).startswith(f"{path}:{line}: user bob: a plain password")
    assert "once user add bob" in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("bad, says", [
    ({"SCRAM-SHA-256": "4096:notbase64!$x:y", "SCRAM-SHA-512": "1:YQ==$YQ==:YQ=="}, "SCRAM-SHA-256: not base64"),
    ({"SCRAM-SHA-256": "1:YQ==$YQ==:YQ=="}, "no SCRAM-SHA-512 hash"),
    ({"SCRAM-SHA-256": "1:YQ==$YQ==:YQ==", "SCRAM-SHA-512": "1:YQ==$YQ==:YQ==", "password": "x"}, "unknown key"),
    (["a", "list"], "expected its SCRAM hashes"),
])
def test_entries_that_are_not_hashes_are_refused(tmp_path, bad, says):
    path = tmp_path / "users.yaml"
    path.write_text(yaml.safe_dump({"carol": bad}))
    with pytest.raises(UsersError, match=says):
        load_users(path)


def test_add_replaces_one_entry_and_keeps_the_others_and_remove_removes(tmp_path):
    path = _users(tmp_path, alice="one", bob="two")
    assert add_user(path, "alice", "three", ("ops",)) is True
    users = load_users(path)
    assert check_plain(users["alice"], "three") and users["alice"].groups == ("ops",)
    assert check_plain(users["bob"], "two")
    assert remove_user(path, "bob") and not remove_user(path, "bob")
    assert set(load_users(path)) == {"alice"}


def _scram(users, mechanism: str, name: str, password: str) -> tuple[SaslStep, ScramClient]:
    client = ScramClient([mechanism], name, password)
    step = scram_exchange(users, mechanism)(client.get_client_first().encode())
    assert step.challenge is not None and step.next is not None  # (also for an unknown name)
    client.set_server_first(step.challenge.decode())
    return step.next(client.get_client_final().encode()), client


@pytest.mark.parametrize("mechanism", SCRAM)
def test_scram_authenticates_and_the_router_proves_it_holds_the_hash(tmp_path, mechanism):
    users = load_users(_users(tmp_path, alice="s3cret"))
    done, client = _scram(users, mechanism, "alice", "s3cret")
    assert done.user == "alice" and done.additional is not None
    client.set_server_final(done.additional.decode())  # (raises if the router's proof is wrong)
    wrong, _ = _scram(users, mechanism, "alice", "guess")
    assert wrong.user is None and wrong.claimed == "alice"
    unknown, _ = _scram(users, mechanism, "mallory", "guess")  # refused at the proof, as a wrong password is
    assert unknown.user is None and unknown.claimed == "mallory"


def test_the_mechanisms_a_connection_is_offered():
    users = load_users_from({"alice": "pw"})
    assert offered(Auth(), tls=False, cert_user=None) == ("ANONYMOUS",)
    assert offered(Auth(users, allow_anonymous=False), tls=False, cert_user=None) == SCRAM  # no PLAIN in the clear
    assert offered(Auth(users, allow_anonymous=False), tls=True, cert_user=None) == (*SCRAM, "PLAIN")
    assert offered(Auth(users, plain_without_tls=True), tls=False, cert_user=None) == (*SCRAM, "PLAIN", "ANONYMOUS")
    assert offered(Auth(allow_anonymous=False), tls=True, cert_user="alice") == ("EXTERNAL",)


def test_plain_is_refused_without_tls_and_external_is_the_certificates_name():
    users = load_users_from({"alice": "pw"})
    clear = client_sasl(Auth(users, allow_anonymous=False), tls=False, peercert=None).authenticate
    assert clear("PLAIN", b"\x00alice\x00pw") == SaslStep(claimed="alice")
    secure = client_sasl(Auth(users, allow_anonymous=False), tls=True, peercert=None).authenticate
    assert secure("PLAIN", b"\x00alice\x00pw") == "alice"
    assert secure("PLAIN", b"bob\x00alice\x00pw") == SaslStep(claimed="alice")  # not on another's behalf
    cert = {"subject": ((("commonName", "carol"),),)}
    ext = client_sasl(Auth(allow_anonymous=False), tls=True, peercert=cert).authenticate
    assert ext("EXTERNAL", b"") == "carol" and ext("EXTERNAL", b"carol") == "carol"
    assert ext("EXTERNAL", b"alice") is None
    assert client_sasl(Auth(), tls=True, peercert=None).authenticate("EXTERNAL", b"") is None


def load_users_from(passwords: dict[str, str]):
    from once.router.security.users import User, make_secrets

    return {n: User(n, make_secrets(pw, iterations=4096)) for n, pw in passwords.items()}
