"""Reading a kubeconfig: inline credentials stay in memory, and a broken file is reported
without echoing what it holds (a token, say)."""

from __future__ import annotations

import base64
import ssl
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from trainop.cluster.reading.config import ConfigError, from_kubeconfig
from trainop.cluster.serving.certs import ca_and_serving_cert

TOKEN = "s3cr3t-t0ken-value"


def kubeconfig(tmp_path: Path, cluster: dict[str, Any], user: dict[str, Any]) -> Path:
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
        "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:6443", **cluster}}],
        "users": [{"name": "u", "user": user}]}))
    return path


def trainop_temp_files() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).iterdir() if p.name.startswith(
        "trainop-")}


def test_inline_credentials_are_used_and_never_left_on_disk(tmp_path: Path) -> None:
    ca, leaf = ca_and_serving_cert("client", ["client"], [], days=1)
    b64 = lambda data: base64.b64encode(data).decode()  # noqa: E731
    path = kubeconfig(tmp_path, {"certificate-authority-data": b64(ca.cert_pem)},
                      {"client-certificate-data": b64(leaf.cert_pem),
                       "client-key-data": b64(leaf.key_pem)})
    before = trainop_temp_files()
    cfg = from_kubeconfig(str(path))
    ctx = cfg.ssl_context()
    assert isinstance(ctx, ssl.SSLContext)
    assert ctx.get_ca_certs()[0]["subject"]  # the inline CA is trusted
    assert (cfg.ca_file, cfg.cert_file, cfg.key_file) == (None, None, None)
    assert trainop_temp_files() == before  # nothing written to stay


@pytest.mark.parametrize(("text", "message"), [
    (f"users:\n- name: u\n  user:\n    token: {TOKEN}: oops\n",
     "line 4: not valid YAML (mapping values are not allowed here)"),
    (f"users: [{{name: u, user: {{token: {TOKEN}}}}}\n", "line 2: not valid YAML"),
    ("- a\n- b\n", "is not a mapping"),
    ("current-context: c\ncontexts: [c]\n", "no context 'c'"),
    ("current-context: c\ncontexts: [{name: c, context: 7}]\n", "context 'c' is not a mapping"),
], ids=["token-line", "unclosed-flow", "a-list", "context-not-mapping", "context-a-number"])
def test_a_broken_kubeconfig_is_one_line_without_its_secrets(tmp_path: Path, text: str,
                                                             message: str) -> None:
    path = tmp_path / "config"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        from_kubeconfig(str(path))
    assert message in str(err.value)
    assert TOKEN not in str(err.value) and "\n" not in str(err.value)
