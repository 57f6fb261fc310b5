"""The secured broker's files, principals and ACLs (``kafkaio.security``): pure, no broker."""

from __future__ import annotations

import ipaddress
from pathlib import Path

from confluent_kafka.admin import AclOperation, ResourcePatternType, ResourceType
from cryptography import x509

import config
from kafkaio import security
from kafkaio.broker import Node, _java_arg, server_properties

ROOT = Path(__file__).resolve().parents[2]


def test_the_tls_files_are_made_once_private_and_name_the_loopback(tmp_path):
    files = security.tls_files(tmp_path / "s")
    assert (tmp_path / "s").stat().st_mode & 0o777 == 0o700
    assert files.node.stat().st_mode & 0o777 == 0o600
    pem = files.node.read_text()
    assert pem.startswith("-----BEGIN PRIVATE KEY-----") and pem.count("CERTIFICATE-----") == 4
    node = x509.load_pem_x509_certificates(pem.encode())[0]
    ca = x509.load_pem_x509_certificate(files.ca.read_bytes())
    node.verify_directly_issued_by(ca)
    san = node.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("127.0.0.1") in san.get_values_for_type(x509.IPAddress)
    assert node.subject.rfc4514_string() == security.NODE_PRINCIPAL
    again = security.tls_files(tmp_path / "s")
    assert again.node.read_text() == pem  # a restart keeps its certificates


def test_passwords_are_random_kept_and_private(tmp_path):
    first = security.passwords(tmp_path)
    assert set(first) == {*security.PARTS, security.BROKER}
    assert len(set(first.values())) == len(first) and all(len(p) >= 24 for p in first.values())
    assert (tmp_path / "credentials.json").stat().st_mode & 0o777 == 0o600
    assert security.passwords(tmp_path) == first


def test_each_part_gets_a_private_settings_file_with_its_own_credentials(tmp_path):
    creds = security.passwords(tmp_path)
    files = security.write_client_configs(tmp_path, "127.0.0.1:1234", creds, tmp_path / "ca.pem")
    import config
    for part, path in files.items():
        assert path.stat().st_mode & 0o777 == 0o600
        cfg = config.load(config_file=path, environ={})
        client = cfg.kafka_client()
        assert client["bootstrap.servers"] == "127.0.0.1:1234"
        assert (client["sasl.username"], client["sasl.password"]) == (part, creds[part])
        assert client["security.protocol"] == "SASL_SSL"


def test_the_acls_follow_the_table_on_the_configured_names():
    names = {t: f"x-{t}" for t in config.TOPICS}
    bindings = security.acl_bindings(names)
    by_part: dict[str, set] = {}
    for b in bindings:
        by_part.setdefault(b.principal, set()).add(
            (b.restype, b.name, b.resource_pattern_type, b.operation))
    topic = ResourceType.TOPIC
    lit = ResourcePatternType.LITERAL
    assert by_part["User:publisher"] == {(topic, "x-publications", lit, AclOperation.WRITE)}
    assert (topic, "x-control", lit, AclOperation.WRITE) in by_part["User:distributor"]
    assert not any(op == AclOperation.WRITE for *_, op in by_part["User:dashboard"])
    assert (ResourceType.TRANSACTIONAL_ID, "geops-", ResourcePatternType.PREFIXED,
            AclOperation.WRITE) in by_part["User:app"]
    assert "User:admin" not in by_part  # a super user


def test_the_docs_hold_the_acl_table():
    assert security.acl_table_markdown() in (ROOT / "docs" / "security.md").read_text()


def test_the_secured_node_listens_on_sasl_ssl_and_tls_only(tmp_path):
    node = Node(1, 1000, 1001)
    props = server_properties(node, [node], tmp_path, security.server_settings(
        tmp_path / "node.pem", tmp_path / "ca.pem", "pw"))
    assert "listener.security.protocol.map=CLIENT:SASL_SSL,CONTROLLER:SSL\n" in props
    assert "listener.name.controller.ssl.client.auth=required\n" in props
    assert "allow.everyone.if.no.acl.found=false\n" in props
    assert "PLAINTEXT" not in props.replace("SASL_SSL", "")


def test_format_arguments_go_through_a_quoted_argument_file():
    args = security.scram_arguments({p: f'pw"{p}\\' for p in (*security.PARTS, "broker")})
    assert args.count("--add-scram") == len(security.PARTS) + 1
    assert _java_arg('a "b" \\c') == '"a \\"b\\" \\\\c"'
