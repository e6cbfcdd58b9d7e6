"""TLS for a router's sockets, with the standard ``ssl`` module: the contexts its listeners
and dials use, built from the topology's ``tls`` section, and taken up again on SIGHUP.

Three contexts per router, from one certificate, key and CA:

- ``clients``: the ``amqps`` listener. It asks for a client certificate when the topology
  says ``require_client_certificate`` (then one is required), and otherwise verifies one a
  client offers (SASL EXTERNAL takes its identity from it);
- ``routers``: the inter-router listener: mutual TLS, a neighbour's certificate is required;
- ``dialling``: the inter-router dials: ours is presented, the neighbour's verified.

A router's certificate names its router id in a subject alternative name of its own,
the URI ``urn:once:router:ID``: a neighbour proves which router it is with it
(``router_ids``). A common name or DNS name is not enough: a client certificate the same
CA made out to ``B`` was taken for router B. Host names are not checked on inter-router
links: routers dial addresses from the topology, and the id is what is authenticated.

Reloading without dropping connections: the contexts the listeners were opened with stay
theirs, and each hands every new handshake the newest context (``sni_callback`` runs on
every ClientHello, with or without a server name). Connections already up keep the session
they negotiated. A reload builds all three from the files, or none: a file that does not
load keeps the running ones, and says why in one line.
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

VERSIONS = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}


class TlsError(ValueError):
    """A one-line message naming the file and what is wrong with it."""


@dataclass(frozen=True, slots=True)
class TlsSpec:
    certificate: Path  # PEM: this router's certificate (and its chain)
    private_key: Path  # PEM, unencrypted
    ca: Path  # PEM: the CA(s) clients' and neighbours' certificates are checked against
    require_client_certificate: bool = False
    min_version: str = "1.2"  # "1.2" or "1.3"
    # OpenSSL's cipher list for TLS 1.2 (1.3's suites are OpenSSL's defaults); None: Python's defaults
    ciphers: str | None = None

    def for_router(self, router_id: str) -> TlsSpec:
        """``{id}`` in a path is the router's id: one topology names each router's own files
        (``certs/{id}.pem``) where they share a directory; on hosts of their own, a plain path."""
        def own(p: Path) -> Path:
            return Path(str(p).replace("{id}", router_id))

        return replace(self, certificate=own(self.certificate), private_key=own(self.private_key), ca=own(self.ca))


def _base(spec: TlsSpec, purpose: ssl.Purpose) -> ssl.SSLContext:
    side = ssl.PROTOCOL_TLS_SERVER if purpose is ssl.Purpose.CLIENT_AUTH else ssl.PROTOCOL_TLS_CLIENT
    ctx = ssl.SSLContext(side)
    ctx.minimum_version = VERSIONS[spec.min_version]
    if spec.ciphers is not None:
        try:
            ctx.set_ciphers(spec.ciphers)
        except ssl.SSLError:
            raise TlsError(f"tls.ciphers: OpenSSL knows none of {spec.ciphers!r}") from None
    for key, path in (("certificate", spec.certificate), ("private_key", spec.private_key), ("ca", spec.ca)):
        # (checked here: ``ssl`` names no file in its errors)
        if not path.is_file():
            raise TlsError(f"tls.{key}: cannot read {path}: no such file")
        if not os.access(path, os.R_OK):
            raise TlsError(f"tls.{key}: cannot read {path}: permission denied")
    try:
        ctx.load_cert_chain(spec.certificate, spec.private_key)
    except ssl.SSLError as e:
        raise TlsError(f"tls: {spec.certificate} and {spec.private_key}: not a PEM certificate and its unencrypted "
                       f"private key ({e.reason or e})") from None
    try:
        ctx.load_verify_locations(cafile=spec.ca)
    except ssl.SSLError as e:
        raise TlsError(f"tls.ca: {spec.ca}: not PEM certificates ({e.reason or e})") from None
    return ctx


def build(spec: TlsSpec) -> tuple[ssl.SSLContext, ssl.SSLContext, ssl.SSLContext]:
    """(clients, routers, dialling): see the module's text. ``TlsError`` when a file does not load."""
    clients = _base(spec, ssl.Purpose.CLIENT_AUTH)
    clients.verify_mode = ssl.CERT_REQUIRED if spec.require_client_certificate else ssl.CERT_OPTIONAL
    routers = _base(spec, ssl.Purpose.CLIENT_AUTH)
    routers.verify_mode = ssl.CERT_REQUIRED
    dialling = _base(spec, ssl.Purpose.SERVER_AUTH)
    dialling.check_hostname = False  # (the neighbour's router id is checked instead: ``names``)
    dialling.verify_mode = ssl.CERT_REQUIRED
    return clients, routers, dialling


class RouterTls:
    """One router's TLS contexts, and their reload."""

    def __init__(self, spec: TlsSpec) -> None:
        self.spec = spec
        self.clients, self.routers, self.dialling = build(spec)
        # The contexts the listeners hold: each hands a new handshake the newest context.
        self.clients.sni_callback = self._newest_clients
        self.routers.sni_callback = self._newest_routers
        self._front_clients, self._front_routers = self.clients, self.routers
        self.loaded = 1  # how many times the files were loaded (1: at start)

    def _newest_clients(self, obj: ssl.SSLObject, server_name: str | None, ctx: ssl.SSLContext) -> None:
        if obj.context is not self.clients:
            obj.context = self.clients

    def _newest_routers(self, obj: ssl.SSLObject, server_name: str | None, ctx: ssl.SSLContext) -> None:
        if obj.context is not self.routers:
            obj.context = self.routers

    def listening(self, for_routers: bool) -> ssl.SSLContext:
        """The context a listener opens with (for clients, or for neighbours)."""
        return self._front_routers if for_routers else self._front_clients

    def reload(self) -> None:
        """Load the files again (SIGHUP); ``TlsError`` keeps the running contexts."""
        self.clients, self.routers, self.dialling = build(self.spec)
        self.loaded += 1


ROUTER_URI = "urn:once:router:"  # a router's certificate: URI:urn:once:router:ID among its alternative names


def router_ids(peercert: dict[str, Any] | None) -> set[str]:
    """The routers a verified certificate is for (its ``urn:once:router:ID`` names)."""
    if not peercert:
        return set()
    return {v[len(ROUTER_URI):] for k, v in peercert.get("subjectAltName", ()) if k == "URI" and v.startswith(ROUTER_URI)}


def describe_router_ids(peercert: dict[str, Any] | None) -> str:
    """What a log line says a certificate is for, as a router."""
    ids = router_ids(peercert)
    return (f"names router {', '.join(sorted(ids))}" if ids else
            f"names no router (a router's certificate carries the alternative name URI:{ROUTER_URI}ID; "
            f"one with only a common or DNS name is a client's)")


def common_name(peercert: dict[str, Any] | None) -> str | None:
    """A verified client certificate's common name: the user SASL EXTERNAL authenticates as."""
    if not peercert:
        return None
    for rdn in peercert.get("subject", ()):
        for k, v in rdn:
            if k == "commonName":
                return str(v)
    return None
