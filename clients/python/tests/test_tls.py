"""The client over HTTPS: the CA bundle it checks the gateway with, client certificates, and the
refusal to send its bearer token over plain http:// beyond loopback.

The gateway here is a local ``http.server`` on 127.0.0.1 behind ``ssl``, with a CA and certificates
made by the openssl CLI for the test (no real gateway is needed). It records the Authorization
header of each request.
"""

import http.server
import itertools
import json
import ssl
import subprocess
import threading

import pytest

from rods_client import RodsClient, RodsError, ca_bundle_from_env, is_loopback_host

TOKEN = "tls-test-token"
_SERIALS = itertools.count(1)
CA_VARIABLES = ("RODS_CA_BUNDLE", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "RODS_ALLOW_INSECURE_HTTP",
                "RODS_CLIENT_CERT", "RODS_CLIENT_KEY")


def _openssl(folder, *args):
    subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True)


def _ca(folder, name):
    _openssl(folder, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", f"{name}.key", "-out", f"{name}.crt", "-days", "2", "-subj", f"/CN={name}",
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    return str(folder / f"{name}.crt"), str(folder / f"{name}.key")


def _leaf(folder, name, ca, san):
    (folder / f"{name}.ext").write_text(f"subjectAltName={san}\nextendedKeyUsage=serverAuth,clientAuth\n"
                                        "basicConstraints=CA:FALSE\n")
    _openssl(folder, "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}")
    _openssl(folder, "x509", "-req", "-in", f"{name}.csr", "-CA", ca[0], "-CAkey", ca[1], "-set_serial",
             str(next(_SERIALS)), "-extfile", f"{name}.ext", "-out", f"{name}.crt", "-days", "2")
    return str(folder / f"{name}.crt"), str(folder / f"{name}.key")


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pki")
    ca = _ca(folder, "ca")
    other = _ca(folder, "other-ca")
    return {"ca": ca[0], "other": other[0], "server": _leaf(folder, "server", ca, "DNS:localhost,IP:127.0.0.1"),
            "client": _leaf(folder, "client", ca, "DNS:trainer")}


class Gateway:
    """A stand-in gateway: GET /openapi.json answers its version, /moved redirects to ``moved_to``."""

    def __init__(self, context=None):
        self.authorizations = []
        self.moved_to = None
        gateway = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                gateway.authorizations.append(self.headers.get("Authorization"))
                if self.path == "/moved" and gateway.moved_to:
                    self.send_response(302)
                    self.send_header("Location", gateway.moved_to)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = json.dumps({"info": {"version": "tls"}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if context is not None:
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        scheme = "https" if context is not None else "http"
        self.url = f"{scheme}://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def _server_context(pki, client_ca=None):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*pki["server"])
    if client_ca:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(client_ca)
    return context


@pytest.fixture()
def env(monkeypatch):
    for name in CA_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.fixture()
def https_gateway(pki):
    gateway = Gateway(_server_context(pki))
    yield gateway
    gateway.close()


def _client(url, **kwargs):
    return RodsClient(url, TOKEN, "tls", retries=0, timeout=10, **kwargs)


def test_the_ca_bundle_comes_from_rods_ca_bundle_then_ssl_cert_file_then_requests_ca_bundle(env, pki):
    assert ca_bundle_from_env({}) is None
    assert ca_bundle_from_env({"REQUESTS_CA_BUNDLE": "r", "SSL_CERT_FILE": "s"}) == "s"
    assert ca_bundle_from_env({"REQUESTS_CA_BUNDLE": "r"}) == "r"
    assert ca_bundle_from_env({"RODS_CA_BUNDLE": "o", "REQUESTS_CA_BUNDLE": "r", "SSL_CERT_FILE": "s"}) == "o"


@pytest.mark.parametrize("variable", ["RODS_CA_BUNDLE", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE"])
def test_a_gateway_whose_ca_is_in_the_bundle_answers(env, pki, https_gateway, variable):
    env.setenv(variable, pki["ca"])
    assert _client(https_gateway.url).api_version() == "tls"
    assert https_gateway.authorizations == [f"Bearer {TOKEN}"]


def test_a_gateway_the_bundle_does_not_vouch_for_is_refused(env, pki, https_gateway):
    # The system's CAs do not know the test CA; nor does another CA's bundle, even with the right
    # one in a lower-precedence variable.
    with pytest.raises(RodsError, match="CERTIFICATE_VERIFY_FAILED"):
        _client(https_gateway.url).api_version()
    env.setenv("RODS_CA_BUNDLE", pki["other"])
    env.setenv("SSL_CERT_FILE", pki["ca"])
    with pytest.raises(RodsError, match="CERTIFICATE_VERIFY_FAILED"):
        _client(https_gateway.url).api_version()
    # The argument wins over the environment.
    assert _client(https_gateway.url, ca_bundle=pki["ca"]).api_version() == "tls"
    # The token went out only on the one connection that verified.
    assert https_gateway.authorizations == [f"Bearer {TOKEN}"]


def test_a_missing_bundle_is_named(env, tmp_path):
    env.setenv("RODS_CA_BUNDLE", str(tmp_path / "nowhere.pem"))
    with pytest.raises(ValueError, match="nowhere.pem does not exist"):
        _client("https://127.0.0.1:1")


def test_a_gateway_that_asks_for_a_client_certificate(env, pki):
    gateway = Gateway(_server_context(pki, client_ca=pki["ca"]))
    try:
        env.setenv("RODS_CA_BUNDLE", pki["ca"])
        with pytest.raises(RodsError) as refused:
            _client(gateway.url).api_version()
        assert refused.value.status == 0
        env.setenv("RODS_CLIENT_CERT", pki["client"][0])
        env.setenv("RODS_CLIENT_KEY", pki["client"][1])
        assert _client(gateway.url).api_version() == "tls"
        assert _client(gateway.url, client_cert=pki["client"][0], client_key=pki["client"][1]).api_version() == "tls"
    finally:
        gateway.close()


@pytest.mark.parametrize("url", ["http://10.0.0.7:7500", "http://gateway.internal:7500", "http://[2001:db8::1]:7500",
                                 "http://0.0.0.0:7500", "http://localhost.example.com"])
def test_plain_http_beyond_loopback_is_refused_unless_allowed(env, url):
    with pytest.raises(ValueError, match=r"refusing to send the bearer token over plain http:// .*"
                                         r"RODS_ALLOW_INSECURE_HTTP=1"):
        _client(url)
    with pytest.raises(ValueError, match="refusing"):
        RodsClient.from_env(url, TOKEN, "tls")
    assert _client(url, allow_insecure_http=True).base_url == url
    env.setenv("RODS_ALLOW_INSECURE_HTTP", "1")
    assert _client(url).base_url == url
    # The argument wins over the environment.
    with pytest.raises(ValueError, match="refusing"):
        _client(url, allow_insecure_http=False)


def test_plain_http_on_loopback_is_allowed(env):
    gateway = Gateway()
    try:
        assert _client(gateway.url).api_version() == "tls"
        assert gateway.authorizations == [f"Bearer {TOKEN}"]
    finally:
        gateway.close()
    for url in ("http://127.0.0.1:7500", "http://127.3.4.5", "http://localhost:7500", "http://LOCALHOST",
                "http://[::1]:7500"):
        _client(url)
    assert [is_loopback_host(h) for h in ("127.0.0.1", "::1", "::ffff:127.0.0.1", "localhost")] == [True] * 4
    assert [is_loopback_host(h) for h in ("10.0.0.1", "::", "128.0.0.1", "", None)] == [False] * 5
    with pytest.raises(ValueError, match="http"):
        _client("ftp://127.0.0.1")


def test_a_redirect_never_carries_the_token(env, pki, https_gateway):
    elsewhere = Gateway()
    try:
        https_gateway.moved_to = elsewhere.url + "/openapi.json"
        env.setenv("RODS_CA_BUNDLE", pki["ca"])
        _client(https_gateway.url)._request("GET", "/moved")
        assert https_gateway.authorizations == [f"Bearer {TOKEN}"]
        assert elsewhere.authorizations == [None]
    finally:
        elsewhere.close()
