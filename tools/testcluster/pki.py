"""Certificates and the kubeconfig of the test control plane (tools/testcluster `up`)."""

from __future__ import annotations

import base64
import datetime
import ipaddress
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def write_pki(pki: Path) -> Path:
    """A CA, one serving certificate for every 127.0.0.1 listener, the admin client and the SA signing key."""
    pki.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)

    def key() -> ec.EllipticCurvePrivateKey:
        return ec.generate_private_key(ec.SECP256R1())

    def save(name: str, private: ec.EllipticCurvePrivateKey, cert: x509.Certificate | None) -> None:
        (pki / f"{name}.key").write_bytes(private.private_bytes(  # "EC PRIVATE KEY", which every reader takes
            serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()))
        if cert is not None:
            (pki / f"{name}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))

    def issue(subject: x509.Name, public: ec.EllipticCurvePublicKey, signer: ec.EllipticCurvePrivateKey,
              issuer: x509.Name, extensions: list) -> x509.Certificate:
        builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(public)
                   .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
                   .not_valid_after(now + datetime.timedelta(days=30)))
        for ext, critical in extensions:
            builder = builder.add_extension(ext, critical=critical)
        return builder.sign(signer, hashes.SHA256())

    ca_key = key()
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "elxpk-testcluster-ca")])
    save("ca", ca_key, issue(ca_name, ca_key.public_key(), ca_key, ca_name,
                             [(x509.BasicConstraints(ca=True, path_length=None), True)]))
    serving_key = key()
    sans = x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                        x509.DNSName("localhost"), x509.DNSName("kubernetes.default.svc")])
    save("serving", serving_key, issue(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]),
                                       serving_key.public_key(), ca_key, ca_name, [(sans, False)]))
    admin_key = key()
    admin_name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters"),
                            x509.NameAttribute(NameOID.COMMON_NAME, "admin")])
    save("admin", admin_key, issue(admin_name, admin_key.public_key(), ca_key, ca_name, []))
    sa_key = key()
    save("sa", sa_key, None)
    (pki / "sa.pub").write_bytes(sa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    webhook_certs = pki / "webhook"
    webhook_certs.mkdir(exist_ok=True)
    (webhook_certs / "tls.crt").write_bytes((pki / "serving.crt").read_bytes())
    (webhook_certs / "tls.key").write_bytes((pki / "serving.key").read_bytes())
    return pki


def write_kubeconfig(path: Path, server: str, pki: Path) -> Path:
    def b64(name: str) -> str:
        return base64.b64encode((pki / name).read_bytes()).decode()

    config = {"apiVersion": "v1", "kind": "Config", "current-context": "testcluster",
              "clusters": [{"name": "testcluster", "cluster": {"server": server,
                                                               "certificate-authority-data": b64("ca.crt")}}],
              "users": [{"name": "admin", "user": {"client-certificate-data": b64("admin.crt"),
                                                   "client-key-data": b64("admin.key")}}],
              "contexts": [{"name": "testcluster", "context": {"cluster": "testcluster", "user": "admin"}}]}
    path.write_text(yaml.safe_dump(config))
    return path
