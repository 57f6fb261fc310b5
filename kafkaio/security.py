"""The secured local broker's parts: TLS material, one SCRAM principal per part of geops, the
ACLs each part needs and no more, and each part's client settings.

``geops broker start --secure`` makes, on first start, a certificate authority and the nodes'
certificate (``cryptography``: the well-kept library for X.509 in Python, so no ``openssl`` or
``keytool`` runs are needed) and a random password per principal, in
``<state_dir>/broker/secure/``, readable by the user only. The broker takes clients on SASL_SSL
with SCRAM-SHA-512 only; its nodes talk to each other as the ``broker`` principal on the same
listener and reach the controllers over TLS with the nodes' certificate (mutual TLS). Kafka's
``StandardAuthorizer`` allows nothing that no ACL allows (``allow.everyone.if.no.acl.found``
false); ``broker`` and ``admin`` are super users, every other part gets ``ACL_TABLE``.

Each part connects with its own settings file, ``secure/<part>.toml`` (a ``--config`` /
``GEOPS_CONFIG`` file: bootstrap servers, ``security.protocol``, ``sasl.*``,
``ssl.ca.location``), so its password never appears on a command line.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from kafkaio.errors import SecurityError

MECHANISM = "SCRAM-SHA-512"
PROTOCOL = "SASL_SSL"
# The principals: one per part of geops, ``broker`` for the nodes themselves.
PARTS = ("app", "distributor", "publisher", "subscriber", "dashboard", "admin")
BROKER = "broker"
SUPER_USERS = (BROKER, "admin")
# The subject of the nodes' certificate: their principal on the controller listener (mutual TLS).
NODE_CN = "geops-broker"
NODE_PRINCIPAL = f"CN={NODE_CN}"
# Every geops consumer's group id and every exactly-once producer's transactional id starts so
# (``kafkaio.clients.consumer``, ``kafkaio.transactions.transactional_id``). Spark's connector
# needs no group: its consumers are assigned their partitions and commit nothing.
GROUP_PREFIX = "geops-"
TRANSACTIONAL_PREFIX = "geops-"
CERT_DAYS = 3650


@dataclass(frozen=True)
class Grant:
    """One row of the ACL table: ``principal`` may do ``operations`` on the named resources."""

    part: str
    reads: tuple[str, ...] = ()      # logical topics it reads
    writes: tuple[str, ...] = ()     # logical topics it writes
    describes: tuple[str, ...] = ()  # logical topics whose offsets it asks for, unread
    groups: bool = False             # consumer groups of the geops prefix (to read at all)
    transactions: bool = False       # transactional ids of the geops prefix (exactly-once)


# What each part does with Kafka, by logical topic (``config.settings.TOPICS``); ``admin``
# (topics, ACLs) and ``broker`` are super users and have no row.
ACL_TABLE = (
    Grant("app", reads=("publications", "subscriptions", "control", "matches", "metrics",
                        "positions", "events", "lease"),
          writes=("matches", "metrics", "dead_letter", "positions", "events", "lease"),
          groups=True,
          transactions=True),
    Grant("distributor", reads=("metrics", "control"), writes=("control", "status"),
          groups=True),
    Grant("publisher", writes=("publications",)),
    Grant("subscriber", reads=("matches",), writes=("subscriptions",), groups=True),
    Grant("dashboard", reads=("metrics", "status", "control", "matches", "events"),
          describes=("publications",), groups=True),
)


def secure_dir(home: Path) -> Path:
    """Where the broker home ``home`` (``<state_dir>/broker``) keeps its TLS and credentials."""
    return home / "secure"


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable and writable by the user only (from the first byte)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(path, 0o600)


@dataclass(frozen=True)
class TlsFiles:
    """The CA certificate clients trust and the nodes' key and certificate chain (PEM)."""

    ca: Path
    node: Path  # the private key, then the node's certificate and the CA's


def tls_files(directory: Path) -> TlsFiles:
    """The CA and node certificate of ``directory``, made on first use (P-256 keys, ten years,
    the node's certificate valid for 127.0.0.1 and localhost, server and client use)."""
    files = TlsFiles(directory / "ca.pem", directory / "node.pem")
    if files.ca.exists() and files.node.exists():
        return files
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    until = now + datetime.timedelta(days=CERT_DAYS)

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = name("geops local CA")
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now).not_valid_after(until)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False,
                                       False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    node_key = ec.generate_private_key(ec.SECP256R1())
    node = (x509.CertificateBuilder().subject_name(name(NODE_CN)).issuer_name(ca_name)
            .public_key(node_key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(until)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
                critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                  ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    ca_pem = ca.public_bytes(pem).decode()
    key_pem = node_key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                     serialization.NoEncryption()).decode()
    write_private(files.node, key_pem + node.public_bytes(pem).decode() + ca_pem)
    files.ca.write_text(ca_pem)
    return files


def passwords(directory: Path) -> dict[str, str]:
    """Every principal's password (``PARTS`` and ``broker``), made at random on first use and
    kept in ``directory/credentials.json``, readable by the user only."""
    path = directory / "credentials.json"
    try:
        saved = json.loads(path.read_text())
    except FileNotFoundError:
        saved = {}
    except (OSError, ValueError) as exc:
        raise SecurityError(f"cannot read the broker's credentials {path}: {exc}") from None
    wanted = (*PARTS, BROKER)
    if all(isinstance(saved.get(p), str) for p in wanted):
        return {p: saved[p] for p in wanted}
    directory.mkdir(parents=True, exist_ok=True)
    made = {p: saved.get(p) or secrets.token_urlsafe(24) for p in wanted}
    write_private(path, json.dumps(made, indent=1) + "\n")
    return made


def client_settings(part: str, password: str, ca: Path) -> dict[str, str]:
    """The librdkafka settings with which ``part`` connects to the secured broker."""
    return {"security.protocol": PROTOCOL, "sasl.mechanism": MECHANISM,
            "sasl.username": part, "sasl.password": password, "ssl.ca.location": str(ca)}


def _toml_string(value: str) -> str:
    return json.dumps(value)  # a JSON string is a TOML basic string


def write_client_configs(directory: Path, address: str, creds: Mapping[str, str],
                         ca: Path) -> dict[str, Path]:
    """One geops settings file per part (``<part>.toml``, readable by the user only): the
    broker's address and the part's client settings. Returns part -> file."""
    files = {}
    for part in PARTS:
        lines = [f"# geops client settings of the part '{part}' on the secured local broker",
                 "# (pass with --config FILE or GEOPS_CONFIG=FILE).", "[kafka]",
                 f"bootstrap_servers = {_toml_string(address)}", "", "[kafka.client]"]
        lines += [f"{_toml_string(k)} = {_toml_string(v)}"
                  for k, v in client_settings(part, creds[part], ca).items()]
        path = directory / f"{part}.toml"
        write_private(path, "\n".join(lines) + "\n")
        files[part] = path
    return files


def server_settings(node_pem: Path, ca: Path, broker_password: str) -> dict[str, str]:
    """The secured node's settings beside its listeners: TLS, SCRAM, the authorizer."""
    jaas = (f'org.apache.kafka.common.security.scram.ScramLoginModule required '
            f'username="{BROKER}" password="{broker_password}";')
    return {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(node_pem),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca),
        "ssl.endpoint.identification.algorithm": "https",
        "listener.name.controller.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": MECHANISM,
        "sasl.mechanism.inter.broker.protocol": MECHANISM,
        "listener.name.client.scram-sha-512.sasl.jaas.config": jaas,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "false",
        "super.users": ";".join([*(f"User:{u}" for u in SUPER_USERS),
                                 f"User:{NODE_PRINCIPAL}"]),
    }


def scram_arguments(creds: Mapping[str, str]) -> list[str]:
    """``kafka-storage format`` arguments that put every principal's SCRAM credentials in the
    cluster's first metadata (KIP-900), so the nodes can log in to each other at first start."""
    out = []
    for user in (BROKER, *PARTS):
        out += ["--add-scram", f"{MECHANISM}=[name={user},password={creds[user]}]"]
    return out


def acl_bindings(topic_names: Mapping[str, str],
                 table: Iterable[Grant] = ACL_TABLE) -> list:
    """The ``AclBinding``s of ``table`` for the topics' real names (logical -> name)."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    def allow(part: str, rtype, name: str, op, pattern=ResourcePatternType.LITERAL):
        return AclBinding(rtype, name, pattern, f"User:{part}", "*", op,
                          AclPermissionType.ALLOW)

    out = []
    for g in table:
        for t in g.reads:
            out.append(allow(g.part, ResourceType.TOPIC, topic_names[t], AclOperation.READ))
        for t in g.writes:
            out.append(allow(g.part, ResourceType.TOPIC, topic_names[t], AclOperation.WRITE))
        for t in g.describes:
            out.append(allow(g.part, ResourceType.TOPIC, topic_names[t], AclOperation.DESCRIBE))
        if g.groups:
            out.append(allow(g.part, ResourceType.GROUP, GROUP_PREFIX, AclOperation.READ,
                             ResourcePatternType.PREFIXED))
        if g.transactions:
            out += [allow(g.part, ResourceType.TRANSACTIONAL_ID, TRANSACTIONAL_PREFIX, op,
                          ResourcePatternType.PREFIXED)
                    for op in (AclOperation.WRITE, AclOperation.DESCRIBE)]
    return out


def apply_acls(admin_conf: Mapping[str, str], bindings: list, timeout: float = 30.0) -> None:
    """Create ``bindings`` as the ``admin`` principal (creating one that exists is a no-op)."""
    from confluent_kafka.admin import AdminClient

    client = AdminClient({**admin_conf, "log_level": 0})
    futures = client.create_acls(bindings, request_timeout=timeout)
    for binding, future in futures.items():
        try:
            future.result()
        except Exception as exc:  # KafkaException: the broker refused one binding
            raise SecurityError(f"the broker refused the ACL {binding}: {exc}") from None


def acl_table_markdown(table: Iterable[Grant] = ACL_TABLE) -> str:
    """The ACL table as Markdown (the docs hold this table; a test keeps them equal)."""
    rows = ["| principal | reads (topics) | writes (topics) | describes (topics) | "
            "consumer groups | transactional ids |", "|---|---|---|---|---|---|"]
    for g in table:
        groups = f"`{GROUP_PREFIX}*`" if g.groups else "–"
        txn = f"`{TRANSACTIONAL_PREFIX}*` (write, describe)" if g.transactions else "–"
        rows.append(f"| `{g.part}` | {', '.join(g.reads) or '–'} | "
                    f"{', '.join(g.writes) or '–'} | {', '.join(g.describes) or '–'} | "
                    f"{groups} | {txn} |")
    rows.append("| `admin` | super user: creates topics and ACLs | | | | |")
    return "\n".join(rows)
