"""The clients over TLS, against a server with a certificate made for the test."""
import asyncio
import os
import ssl
import subprocess
import tempfile

import pytest

from conftest import validate
from viewline import AsyncClient, Client, ConnectError


@pytest.fixture(scope="module")
def certificate():
    directory = tempfile.mkdtemp()
    cert, key = os.path.join(directory, "cert.pem"), os.path.join(directory, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True)
    return cert, key


def test_a_flow_over_tls(make_server, certificate):
    cert, key = certificate
    server = make_server("--tls-cert", cert, "--tls-key", key)
    with Client.connect(port=server.port, ca_file=cert, on_message=validate) as vl:
        vl.command("search pizza")
        assert vl.wait_for_display("search", lambda s: not s["loading"])["results"]


def test_an_untrusted_certificate_is_refused(make_server, certificate):
    cert, key = certificate
    server = make_server("--tls-cert", cert, "--tls-key", key)
    with pytest.raises(ConnectError) as caught:
        Client.connect(port=server.port, tls=True)
    assert isinstance(caught.value.__cause__, ssl.SSLCertVerificationError)
    assert caught.value.code == "connect_failed"


def test_the_asyncio_client_over_tls(make_server, certificate):
    cert, key = certificate
    server = make_server("--tls-cert", cert, "--tls-key", key)

    async def scenario() -> None:
        async with await AsyncClient.connect(port=server.port, ca_file=cert) as vl:
            assert await vl.command("ping") == {"pong": True}

    asyncio.run(scenario())
