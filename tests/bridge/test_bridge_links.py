"""Links between hosts use TLS and per-host credentials: nothing crosses in the clear, and a
host with the wrong credential gets nothing across."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from bridge_helpers import Pair, need_nats, wait_for


def _certs(d: Path) -> tuple[Path, Path, Path]:
    """A throwaway CA and a certificate for 127.0.0.1 signed by it (real openssl)."""
    d.mkdir()
    ca_key, ca, key, csr, cert = (d / n for n in ("ca.key", "ca.pem", "a.key", "a.csr", "a.pem"))
    ext = d / "ext.cnf"
    ext.write_text("subjectAltName=IP:127.0.0.1\n")

    def ossl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    ossl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key), "-out", str(ca),
         "-days", "2", "-subj", "/CN=test-ca")  # fmt: skip
    ossl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr),
         "-subj", "/CN=127.0.0.1")  # fmt: skip
    ossl("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key),
         "-CAcreateserial", "-out", str(cert), "-days", "2", "-extfile", str(ext))  # fmt: skip
    return ca, cert, key


def _pair(tmp_path: Path, password: str) -> Pair:
    need_nats()
    ca, cert, key = _certs(tmp_path / "pki")
    tls_a = ("--tls-cert", str(cert), "--tls-key", str(key), "--tls-ca", str(ca))
    creds = ("--leaf-user", "b=right-horse-battery")
    p = Pair(tmp_path, a_extra=(*tls_a, *creds), b_extra=("--tls-ca", str(ca)))
    # b presents its own credential (user b) in its remote URL
    url = f"nats-leaf://b:{password}@127.0.0.1:{p.proxy.port}"
    from bridge_helpers import cli

    cli("bridge", "init", "--dir", str(p.b.dir), "--host", "b", "--peer", "a",
        "--listen", f"127.0.0.1:{p.b.client_port}", "--leaf-remote", url, "--tls-ca", str(ca),
        "--exchange", str(p.b.root), "--name", "ex", "--side", "a=a", "--side", "b=b",
        "--home", "a")  # fmt: skip
    return p


def test_entries_cross_over_tls_with_the_hosts_credential_never_in_the_clear(tmp_path) -> None:
    p = _pair(tmp_path, "right-horse-battery")
    p.start()
    try:
        assert "tls" in (p.a.dir / "nats.conf").read_text()
        rel = p.a.send("a", "secret", "the launch code is swordfish")
        wait_for(lambda: (p.b.root / rel).exists(), 30, "the entry over TLS")
        assert b"swordfish" not in bytes(p.proxy.seen)
        assert len(p.proxy.seen) > 1000  # the link did carry it, encrypted
    finally:
        p.stop()


def test_a_host_with_the_wrong_credential_gets_nothing_across(tmp_path) -> None:
    p = _pair(tmp_path, "wrong-password")
    p.start()
    try:
        rel = p.a.send("a", "secret", "not for impostors")
        time.sleep(6)
        assert not (p.b.root / rel).exists()
        log = (p.a.dir / "nats.log").read_text()
        assert "Authentication Failure" in log  # the server says why it refused the leafnode
    finally:
        p.stop()


@pytest.fixture(autouse=True)
def _openssl() -> None:
    import shutil

    if not shutil.which("openssl"):
        pytest.skip("openssl is not installed")
