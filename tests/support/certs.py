"""Certificates for the TLS tests, made by the test (the ``cryptography`` package): a CA,
and certificates it signs for routers and clients, as PEM files in a directory."""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Issued:
    cert: Path
    key: Path


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))


class CA:
    """A certificate authority in ``directory``: ``ca.pem`` is what a peer trusts."""

    def __init__(self, directory: Path, name: str = "once test CA") -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.dir = directory
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        self.cert = (x509.CertificateBuilder().subject_name(_name(name)).issuer_name(_name(name))
                     .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
                     .not_valid_before(now - dt.timedelta(hours=1)).not_valid_after(now + dt.timedelta(days=2))
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                     .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                                  content_commitment=False, key_encipherment=False,
                                                  data_encipherment=False, key_agreement=False, encipher_only=False,
                                                  decipher_only=False), critical=True)
                     .sign(self.key, hashes.SHA256()))
        self.pem = directory / "ca.pem"
        self.pem.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, cn: str, file: str | None = None, dns: tuple[str, ...] = ("localhost",),
              ips: tuple[str, ...] = ("127.0.0.1",), expired: bool = False, router: bool = True,
              ips_as_dns: bool = True) -> Issued:
        """A certificate for ``cn`` (server and client use), valid now unless ``expired``;
        a ``router``'s names router ``cn`` (URI:urn:once:router:CN), a client's does not."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        start, end = (now - dt.timedelta(days=3), now - dt.timedelta(days=1)) if expired else \
            (now - dt.timedelta(hours=1), now + dt.timedelta(days=1))
        # (the IP addresses as DNS names too: Proton's host name check reads DNS names only)
        # (``ips_as_dns=False``: as an operator's openssl recipe makes them)
        sans: list[x509.GeneralName] = [x509.DNSName(d) for d in (cn, *dns, *(ips if ips_as_dns else ()))]
        sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
        if router:
            sans.append(x509.UniformResourceIdentifier(f"urn:once:router:{cn}"))
        cert = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(self.cert.subject)
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(start).not_valid_after(end)
                .add_extension(x509.SubjectAlternativeName(sans), critical=False)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                               critical=False)
                .sign(self.key, hashes.SHA256()))
        stem = file or cn
        issued = Issued(self.dir / f"{stem}.pem", self.dir / f"{stem}-key.pem")
        issued.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_key(key, issued.key)
        return issued
