"""SSH key pairs for MPI jobs (the engine takes them as input; it makes nothing random)."""

from __future__ import annotations

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from trainop.engine import SSHKeyPair


def new_key_pair() -> SSHKeyPair:
    key = ed25519.Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                           serialization.PublicFormat.OpenSSH).decode()
    return SSHKeyPair(private_key=private, public_key=public + " trainop\n")
