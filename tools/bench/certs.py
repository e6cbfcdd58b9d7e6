"""Certificates for ``once bench --tls``: a CA and one certificate the bench's routers share
(it names every router id, as inter-router TLS asks, and 127.0.0.1), made with the
``openssl`` command for the run and thrown away with it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from ..exits import CommandError, Exit


def make(directory: Path, router_ids: list[str]) -> tuple[Path, Path, Path]:
    """(certificate, private key, CA) in ``directory``."""
    if shutil.which("openssl") is None:
        raise CommandError(Exit.USAGE, "--tls makes its certificates with the openssl command: install openssl")
    directory.mkdir(parents=True, exist_ok=True)
    ca, ca_key = directory / "ca.pem", directory / "ca-key.pem"
    cert, key, csr = directory / "router.pem", directory / "router-key.pem", directory / "router.csr"
    ext = directory / "san.cnf"
    names = ",".join([*(f"DNS:{r}" for r in router_ids), *(f"URI:urn:once:router:{r}" for r in router_ids),
                      "DNS:127.0.0.1", "IP:127.0.0.1", "DNS:localhost"])
    ext.write_text(f"subjectAltName={names}\n")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    for cmd in (["openssl", "req", "-x509", *ec, "-days", "2", "-subj", "/CN=once bench CA", "-keyout", str(ca_key),
                 "-out", str(ca)],
                ["openssl", "req", *ec, "-subj", f"/CN={router_ids[0]}", "-keyout", str(key), "-out", str(csr)],
                ["openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial",
                 "-days", "2", "-out", str(cert), "-extfile", str(ext)]):
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise CommandError(Exit.FAILED, f"openssl failed making the bench's certificates: {r.stderr.strip()[-200:]}")
    return cert, key, ca
