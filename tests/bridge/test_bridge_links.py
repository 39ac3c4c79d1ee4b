"""Links between hosts use TLS and per-host credentials: nothing crosses in the clear, and a
host with the wrong credential gets nothing across."""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path

import pytest
from bridge_helpers import Pair, cli, need_nats, wait_for


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


async def _hostile_b(b_url: str, a_url: str) -> dict[str, object]:
    """What b, in control of its own server, tries against a across the leafnode."""
    import json

    import nats

    nb, na = await nats.connect(b_url), await nats.connect(a_url)
    out: dict[str, object] = {}
    try:
        before = (await na.jetstream().stream_info("MS_OUT_a")).state.messages
        await nb.publish("ms.a.ex.e.b.2026-12-02-spoof.0001.a", b"as if a wrote it")
        await nb.flush()
        for name, subject, body in (
            ("purge", "$JS.a.API.STREAM.PURGE.MS_OUT_a", b""),
            ("delete", "$JS.a.API.STREAM.DELETE.MS_IN_b", b""),
            ("steal", "$JS.a.API.CONSUMER.DURABLE.CREATE.MS_IN_b.steal",
             json.dumps({"stream_name": "MS_IN_b",
                         "config": {"durable_name": "steal", "ack_policy": "explicit"}}).encode()),
        ):  # fmt: skip
            try:
                reply = await nb.request(subject, body, timeout=1.0)
                out[name] = reply.data.decode()[:200]
            except Exception as e:
                out[name] = type(e).__name__
        await asyncio.sleep(0.5)
        info = await na.jetstream().stream_info("MS_OUT_a")
        out["out_before"], out["out_after"] = before, info.state.messages
        out["in_b"] = (await na.jetstream().stream_info("MS_IN_b")).state.messages
        out["api_info"] = (
            await nb.jetstream(domain="a", timeout=2.0).stream_info("MS_IN_b")
        ).config.name
    finally:
        await nb.close()
        await na.close()
    return out


def test_a_peers_credential_may_not_publish_as_the_host_or_touch_its_streams(tmp_path) -> None:
    p = _pair(tmp_path, "right-horse-battery")
    p.start()
    try:
        conf = (p.a.dir / "nats.conf").read_text()
        assert "permissions" in conf and '"LEAFNODE"' in conf
        rel = p.a.send("a", "guarded", "before the attack")
        wait_for(lambda: (p.b.root / rel).exists(), 30, "the entry on b")
        out = asyncio.run(_hostile_b(p.b.url, p.a.url))
        assert out["out_after"] == out["out_before"] > 0, out  # nothing slipped in as a
        for attack in ("purge", "delete", "steal"):
            assert out[attack] == "NoRespondersError", out  # never reached a's JetStream
        assert out["api_info"] == "MS_IN_b"  # what the status page asks still answers
        back = p.b.send("b", "guarded", "after the attack")
        wait_for(lambda: (p.a.root / back).exists(), 30, "b's entry on a, the link intact")
        doc = cli("bridge", "doctor", "--dir", str(p.a.dir), "--json", check=False)
        import json

        checks = {c["check"]: c for c in json.loads(doc.stdout)["checks"]}
        assert checks["permissions"]["status"] == "ok", checks["permissions"]
    finally:
        p.stop()
