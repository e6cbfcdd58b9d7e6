"""The users file: salted SCRAM hashes only, never a password.

A YAML mapping of user name to its entry::

    alice:
      SCRAM-SHA-256: "4096:SALT$STOREDKEY:SERVERKEY"   # RFC 5803's form, base64
      SCRAM-SHA-512: "4096:SALT$STOREDKEY:SERVERKEY"
      groups: [operators]                                # optional: for the policies

``once user add NAME --file PATH`` writes an entry. A plain entry (``alice: secret``) is
refused with a one-line error naming the file and the line. The hashes are made and checked
with ``scramp`` (a maintained SCRAM implementation: no hand-written crypto here). PLAIN
(over TLS) is checked against the SCRAM-SHA-256 hash: the password is salted and hashed
as SCRAM would, and the stored key compared in constant time.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from scramp import ScramException, ScramMechanism  # type: ignore[import-untyped]  # (no type marker)

from ..amqp.sasl import SaslStep

SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")
ITERATIONS = 4096  # RFC 7677's minimum, and what PostgreSQL uses
_MECHANISMS = {name: ScramMechanism(name) for name in SCRAM}


class UsersError(ValueError):
    """One line: the file, the line, what is wrong and what to do."""


@dataclass(frozen=True, slots=True)
class Secret:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def text(self) -> str:
        b64 = base64.b64encode
        return (f"{self.iterations}:{b64(self.salt).decode()}${b64(self.stored_key).decode()}:"
                f"{b64(self.server_key).decode()}")

    @classmethod
    def parse(cls, text: str) -> Secret:
        """RFC 5803's ``ITERATIONS:SALT$STOREDKEY:SERVERKEY``; ValueError when it is not."""
        head, _, keys = text.partition("$")
        iterations, _, salt = head.partition(":")
        stored, _, server = keys.partition(":")
        try:
            parts = [base64.b64decode(p, validate=True) for p in (salt, stored, server)]
        except binascii.Error:
            raise ValueError("not base64") from None
        if not iterations.isdigit() or int(iterations) < 1 or not all(parts):
            raise ValueError("expected ITERATIONS:SALT$STOREDKEY:SERVERKEY")
        return cls(parts[0], parts[1], parts[2], int(iterations))


@dataclass(frozen=True, slots=True)
class User:
    name: str
    secrets: dict[str, Secret]  # by mechanism
    groups: tuple[str, ...] = ()


def make_secrets(password: str, iterations: int = ITERATIONS) -> dict[str, Secret]:
    out = {}
    for name, mech in _MECHANISMS.items():
        salt, stored, server, n = mech.make_auth_info(password, iteration_count=iterations)
        out[name] = Secret(salt, stored, server, n)
    return out


def entry(password: str, groups: tuple[str, ...] = ()) -> dict[str, Any]:
    """A user's entry in the file."""
    e: dict[str, Any] = {name: s.text() for name, s in make_secrets(password).items()}
    if groups:
        e["groups"] = list(groups)
    return e


def load_users(path: Path) -> dict[str, User]:
    """The users of ``path``; ``UsersError`` (one line) when it cannot be read or an entry is
    not hashes."""
    try:
        text = path.read_text()
    except OSError as e:
        raise UsersError(f"{path}: cannot read: {e.strerror}") from None
    try:
        root = yaml.compose(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise UsersError(f"{path}{f':{mark.line + 1}' if mark else ''}: not valid YAML") from None
    if root is None:
        return {}
    if not isinstance(root, yaml.MappingNode):
        raise UsersError(f"{path}: expected a mapping of user name to its hashes (`once user add NAME --file {path}`)")
    users: dict[str, User] = {}
    for key, value in root.value:
        name, line = key.value, key.start_mark.line + 1
        where = f"{path}:{line}: user {name}"
        if isinstance(value, yaml.ScalarNode):
            raise UsersError(f"{where}: a plain password; the file holds salted hashes only: "
                             f"`once user add {name} --file {path}` writes them")
        if not isinstance(value, yaml.MappingNode):
            raise UsersError(f"{where}: expected its SCRAM hashes (`once user add {name} --file {path}`)")
        fields = {k.value: v for k, v in value.value}
        unknown = set(fields) - {*SCRAM, "groups"}
        if unknown:
            raise UsersError(f"{where}: unknown key {sorted(unknown)[0]!r} (expected {', '.join(SCRAM)}, groups)")
        found = {}
        for mech in SCRAM:
            node = fields.get(mech)
            if node is None:
                raise UsersError(f"{where}: no {mech} hash (`once user add {name} --file {path}` writes both)")
            try:
                found[mech] = Secret.parse(str(node.value))
            except ValueError as e:
                raise UsersError(f"{path}:{node.start_mark.line + 1}: user {name}: {mech}: {e}") from None
        groups_node = fields.get("groups")
        groups: tuple[str, ...] = ()
        if groups_node is not None:
            if not isinstance(groups_node, yaml.SequenceNode) or \
                    not all(isinstance(g, yaml.ScalarNode) for g in groups_node.value):
                raise UsersError(f"{path}:{groups_node.start_mark.line + 1}: user {name}: groups: expected a list "
                                 "of names")
            groups = tuple(str(g.value) for g in groups_node.value)
        users[str(name)] = User(str(name), found, groups)
    return users


def add_user(path: Path, name: str, password: str, groups: tuple[str, ...] | None = None) -> bool:
    """Write ``name``'s hashes to ``path`` (made if missing), the other entries kept;
    True when it replaced an entry. ``groups`` None keeps a replaced entry's groups (a
    password change must not drop them). The file is replaced whole (written aside, then
    renamed)."""
    existing: dict[str, Any] = {}
    if path.exists():
        # (other entries are kept as they are: a file being moved from plain passwords to
        # hashes is done a user at a time, and the router refuses it until it is)
        existing = _mapping(path)
    replaced = name in existing
    if groups is None:
        old = existing.get(name)
        kept = old.get("groups") if isinstance(old, dict) else None
        groups = tuple(str(g) for g in kept) if isinstance(kept, list) else ()
    existing[name] = entry(password, groups)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(yaml.safe_dump(existing, sort_keys=True))
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
    return replaced


def _mapping(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except OSError as e:
        raise UsersError(f"{path}: cannot read: {e.strerror}") from None
    except yaml.YAMLError:
        raise UsersError(f"{path}: not valid YAML") from None
    if not isinstance(data, dict):
        raise UsersError(f"{path}: expected a mapping of user name to its hashes")
    return data


def remove_user(path: Path, name: str) -> bool:
    existing = _mapping(path)
    if name not in existing:
        return False
    del existing[name]
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(yaml.safe_dump(existing, sort_keys=True))
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
    return True


def check_plain(user: User | None, password: str) -> bool:
    """PLAIN's password against the user's SCRAM-SHA-256 hash (constant time in the key)."""
    if user is None:
        return False
    s = user.secrets["SCRAM-SHA-256"]
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), s.salt, s.iterations)
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    return hmac.compare_digest(hashlib.sha256(client_key).digest(), s.stored_key)


class _Decoys:
    """What an unknown user's SCRAM exchange runs on: made up, but the same for a name each
    time, so the exchange fails at the proof, as a wrong password's does, and does not say
    which names exist."""

    def __init__(self) -> None:
        self.key = secrets.token_bytes(32)

    def secret(self, mechanism: str, name: str) -> Secret:
        salt = hmac.new(self.key, f"{mechanism}\0{name}".encode(), "sha256").digest()[:16]
        return Secret(salt, secrets.token_bytes(64), secrets.token_bytes(64), ITERATIONS)


_DECOYS = _Decoys()


def scram_exchange(users: dict[str, User], mechanism: str) -> Callable[[bytes], SaslStep]:
    """One SCRAM exchange on the server side, fed the client's messages in turn: the first
    (SASL init's response) gets the server-first as a challenge, the final the outcome,
    with the server-final (its signature) as the outcome's additional data."""
    server = _MECHANISMS[mechanism].make_server(lambda name: _auth_info(users, mechanism, name, claimed))
    claimed: list[str] = []

    def first(message: bytes) -> SaslStep:
        try:
            server.set_client_first(message.decode())
            return SaslStep(challenge=server.get_server_first().encode(), next=final)
        except (ScramException, UnicodeDecodeError):
            return SaslStep()

    def final(message: bytes) -> SaslStep:
        try:
            server.set_client_final(message.decode())
        except (ScramException, UnicodeDecodeError):
            return SaslStep(claimed=claimed[0] if claimed else None)
        return SaslStep(user=claimed[0], additional=server.get_server_final().encode())

    return first


def _auth_info(users: dict[str, User], mechanism: str, name: str, claimed: list[str]) -> tuple[bytes, bytes, bytes, int]:
    claimed.append(name)
    user = users.get(name)
    s = user.secrets[mechanism] if user is not None else _DECOYS.secret(mechanism, name)
    return s.salt, s.stored_key, s.server_key, s.iterations
