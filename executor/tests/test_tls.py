"""The executor over HTTPS (RODS_EXECUTOR_TLS_CERT / RODS_EXECUTOR_TLS_KEY), on servers of their own:
a client that checks the certificate against its CA is answered, a plaintext client is not (and
does not stop the server), a certificate replaced on disk is served from the next connection on
without a restart, and half a pair is refused at start."""

from __future__ import annotations

import http.client
import os
import shutil
import ssl
import subprocess
import sys
from pathlib import Path

from test_limits import ROOT, _free_port, wait_until


def _openssl(cwd: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _pki(d: Path) -> None:
    _openssl(d, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=test-ca",
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign")
    (d / "leaf.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    for name, serial in (("server", "1"), ("rotated", "2")):
        _openssl(d, "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                 "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", "/CN=localhost")
        _openssl(d, "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-set_serial", serial,
                 "-extfile", "leaf.ext", "-out", f"{name}.crt", "-days", "2")


def _start(d: Path, **env: str) -> tuple[subprocess.Popen[bytes], int]:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "executor", "--host", "127.0.0.1", "--port", str(port)],
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1", **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    return proc, port


def _https_health(port: int, ca: Path) -> tuple[int, bytes]:
    """/health over HTTPS checked against `ca`: the status and the certificate the server presented."""
    conn = http.client.HTTPSConnection("localhost", port, timeout=10, context=ssl.create_default_context(cafile=str(ca)))
    try:
        conn.request("GET", "/health")
        res = conn.getresponse()
        res.read()
        cert = conn.sock.getpeercert(binary_form=True)  # type: ignore[union-attr]
        return res.status, cert or b""
    finally:
        conn.close()


def _der(pem: Path) -> bytes:
    return ssl.PEM_cert_to_DER_cert(pem.read_text())


def test_https_with_the_ca_plaintext_refused_and_a_rotated_certificate_served(tmp_path: Path) -> None:
    _pki(tmp_path)
    cert, key = tmp_path / "live.crt", tmp_path / "live.key"
    shutil.copy(tmp_path / "server.crt", cert)
    shutil.copy(tmp_path / "server.key", key)
    proc, port = _start(tmp_path, RODS_EXECUTOR_TLS_CERT=str(cert), RODS_EXECUTOR_TLS_KEY=str(key))
    try:
        def answers() -> bool:
            if proc.poll() is not None:
                raise RuntimeError(f"executor exited: {proc.stderr.read().decode()[-2000:]}")  # type: ignore[union-attr]
            try:
                return _https_health(port, tmp_path / "ca.crt")[0] == 200
            except OSError:
                return False

        wait_until(answers, 60, "the executor answers /health over HTTPS")
        assert _https_health(port, tmp_path / "ca.crt")[1] == _der(tmp_path / "server.crt")

        # Plain HTTP gets no answer, and leaves the server serving.
        plain = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            plain.request("GET", "/health")
            try:
                plain.getresponse()
                answered = True
            except (http.client.HTTPException, OSError):
                answered = False
        finally:
            plain.close()
        assert not answered
        assert _https_health(port, tmp_path / "ca.crt")[0] == 200

        # Another CA's client refuses the server.
        other = tmp_path / "other"
        other.mkdir()
        _pki(other)
        try:
            _https_health(port, other / "ca.crt")
            raise AssertionError("a client trusting another CA was answered")
        except ssl.SSLCertVerificationError:
            pass

        # Rotation: the files replaced (key first, then the certificate whose change is watched).
        shutil.copy(tmp_path / "rotated.key", key)
        shutil.copy(tmp_path / "rotated.crt", cert)
        os.utime(cert, (os.stat(cert).st_atime, os.stat(cert).st_mtime + 1))
        status, served = _https_health(port, tmp_path / "ca.crt")
        assert status == 200
        assert served == _der(tmp_path / "rotated.crt")
    finally:
        proc.terminate()
        proc.wait(30)


def test_half_a_pair_is_refused_at_start(tmp_path: Path) -> None:
    _pki(tmp_path)
    proc, _ = _start(tmp_path, RODS_EXECUTOR_TLS_CERT=str(tmp_path / "server.crt"))
    _, err = proc.communicate(timeout=120)
    assert proc.returncode != 0
    assert "RODS_EXECUTOR_TLS_CERT and RODS_EXECUTOR_TLS_KEY" in err.decode()
