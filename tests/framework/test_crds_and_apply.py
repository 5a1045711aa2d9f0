"""CRDs (file, directory, dict, marker, option, over 256 KB, failures) and ``apply``."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client.rest import ApiException

from envtest import Clients, ResourceError, RestMapper, uninstall_crds

pytest_plugins = ["pytester"]

HERE = Path(__file__).parent
ANNOTATION_LIMIT = 256 * 1024  # what client-side apply's last-applied annotation may hold


def crd(group: str, kind: str, *, scope: str = "Namespaced",
        schema: dict[str, Any] | None = None) -> dict[str, Any]:
    plural = kind.lower() + "s"
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group, "scope": scope,
            "names": {"kind": kind, "plural": plural, "singular": kind.lower(),
                      "listKind": f"{kind}List"},
            "versions": [{"name": "v1", "served": True, "storage": True,
                          "schema": {"openAPIV3Schema": schema or {
                              "type": "object",
                              "properties": {"spec": {
                                  "type": "object",
                                  "x-kubernetes-preserve-unknown-fields": True}}}}}],
        },
    }


def create_object(k8s: Clients, group: str, kind: str, namespace: str,
                  spec: dict[str, Any] | None = None) -> dict[str, Any]:
    """Create one object of a freshly installed kind: proves the CRD is really served."""
    body = {"apiVersion": f"{group}/v1", "kind": kind, "metadata": {"name": "one"},
            "spec": spec or {"size": 1}}
    return k8s.custom.create_namespaced_custom_object(group, "v1", namespace,
                                                      kind.lower() + "s", body)


def served_kinds(k8s: Clients, group: str) -> set[str]:
    return {r.kind for r in RestMapper(k8s.api_client).resources(f"{group}/v1", refresh=True)}


# -- installing CRDs ----------------------------------------------------------------------


def test_install_crds_from_a_file(install_crds: Callable[..., list[str]], k8s: Clients,
                                  namespace: str, tmp_path: Path) -> None:
    path = tmp_path / "crd.yaml"
    path.write_text(yaml.safe_dump(crd("file.example.com", "Sprocket")))
    assert install_crds(path) == ["sprockets.file.example.com"]
    crd_object = k8s.apiextensions.read_custom_resource_definition("sprockets.file.example.com")
    established = {c.type: c.status for c in crd_object.status.conditions}
    assert established["Established"] == "True"
    assert "Sprocket" in served_kinds(k8s, "file.example.com")
    assert create_object(k8s, "file.example.com", "Sprocket", namespace)["metadata"]["uid"]
    # Installed by path as a str, too, and again: idempotent.
    assert install_crds(str(path)) == ["sprockets.file.example.com"]


def test_install_crds_from_a_directory(install_crds: Callable[..., list[str]], k8s: Clients,
                                       namespace: str, tmp_path: Path) -> None:
    (tmp_path / "nested").mkdir()
    (tmp_path / "a.yaml").write_text(yaml.safe_dump(crd("dir.example.com", "Alpha")))
    # Two documents in one file, one of them not a CRD (ignored by install_crds).
    (tmp_path / "nested" / "b.yml").write_text(yaml.safe_dump_all([
        crd("dir.example.com", "Beta"),
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "not-a-crd"}}]))
    (tmp_path / "nested" / "c.json").write_text(json.dumps(crd("dir.example.com", "Gamma")))
    (tmp_path / "README.md").write_text("not a manifest")
    names = install_crds(tmp_path)
    assert sorted(names) == ["alphas.dir.example.com", "betas.dir.example.com",
                             "gammas.dir.example.com"]
    assert served_kinds(k8s, "dir.example.com") >= {"Alpha", "Beta", "Gamma"}
    for kind in ("Alpha", "Beta", "Gamma"):
        assert create_object(k8s, "dir.example.com", kind, namespace)["kind"] == kind


def test_install_crds_from_a_dict(install_crds: Callable[..., list[str]], k8s: Clients,
                                  namespace: str) -> None:
    assert install_crds(crd("dict.example.com", "Cog")) == ["cogs.dict.example.com"]
    assert create_object(k8s, "dict.example.com", "Cog", namespace)["spec"] == {"size": 1}


@pytest.mark.envtest_crds("tests/framework/data/gizmos.yaml", crd("markerdict.example.com",
                                                                   "Doohickey"))
def test_install_crds_by_marker_path_and_object(k8s: Clients, namespace: str) -> None:
    # Nothing installed in the body: the marker did it (path relative to rootdir, and a dict).
    gizmo = create_object(k8s, "marker.example.com", "Gizmo", namespace, {"size": 3})
    assert gizmo["spec"] == {"size": 3}
    assert create_object(k8s, "markerdict.example.com", "Doohickey", namespace)


def test_crd_over_256_kib_installs_with_server_side_apply(
        install_crds: Callable[..., list[str]], k8s: Clients, namespace: str) -> None:
    properties = {
        f"field{i:04d}": {"type": "string",
                          "description": f"Field {i}: " + "a long generated description " * 16}
        for i in range(700)
    }
    big = crd("big.example.com", "Behemoth", schema={
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": properties}}})
    size = len(json.dumps(big))
    assert size > ANNOTATION_LIMIT, size  # client-side apply could not store it
    assert install_crds(big) == ["behemoths.big.example.com"]
    stored = k8s.apiextensions.read_custom_resource_definition("behemoths.big.example.com")
    assert stored.metadata.annotations is None or (
        "kubectl.kubernetes.io/last-applied-configuration" not in stored.metadata.annotations)
    version = stored.spec.versions[0]  # the model's attribute: var_schema since client 37
    schema = getattr(version, "var_schema", None) or version.schema
    schema = schema.open_apiv3_schema
    assert len(schema.properties["spec"].properties) == 700
    obj = create_object(k8s, "big.example.com", "Behemoth", namespace,
                        {"field0000": "x", "field0699": "y", "unknown": "pruned"})
    assert obj["spec"] == {"field0000": "x", "field0699": "y"}  # served with its schema


def test_missing_crd_path_fails_naming_the_path(install_crds: Callable[..., list[str]],
                                                tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such-crds.yaml"
    with pytest.raises(ResourceError) as raised:
        install_crds(missing)
    assert str(missing) in str(raised.value)
    assert "does not exist" in str(raised.value)


def test_path_without_crds_fails(install_crds: Callable[..., list[str]], tmp_path: Path) -> None:
    (tmp_path / "cm.yaml").write_text(yaml.safe_dump(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}))
    with pytest.raises(ResourceError, match="holds no CustomResourceDefinition"):
        install_crds(str(tmp_path / "cm.yaml"))


def test_invalid_crd_fails_with_the_servers_message(install_crds: Callable[..., list[str]],
                                                    k8s: Clients) -> None:
    with pytest.raises(ResourceError) as raised:
        install_crds(crd("invalid.example.com", "Bad", scope="Galaxy"))
    message = str(raised.value)
    assert "HTTP 422" in message
    assert 'spec.scope: Unsupported value: "Galaxy"' in message  # the apiserver's own words
    assert "bads.invalid.example.com" in message

    non_structural = crd("invalid.example.com", "Loose", schema={
        "type": "object",
        "properties": {"spec": {"properties": {"size": {"type": "integer"}}}}})  # no type
    with pytest.raises(ResourceError) as raised:
        install_crds(non_structural)
    assert "must not be empty for specified object fields" in str(raised.value)

    for name in ("bads.invalid.example.com", "looses.invalid.example.com"):
        with pytest.raises(ApiException) as missing:
            k8s.apiextensions.read_custom_resource_definition(name)
        assert missing.value.status == 404


def test_crd_with_conflicting_names_fails_with_its_condition(
        install_crds: Callable[..., list[str]], k8s: Clients) -> None:
    first = crd("conflict.example.com", "Twin")
    second = crd("conflict.example.com", "Twin")  # same kind under another plural
    second["metadata"]["name"] = "twinz.conflict.example.com"
    second["spec"]["names"]["plural"] = "twinz"
    install_crds(first)
    try:
        with pytest.raises(ResourceError, match="names not accepted: .*Twin"):
            install_crds(second, timeout=10)
    finally:
        uninstall_crds(k8s.api_client, ["twinz.conflict.example.com"])


def test_envtest_crds_option_installs_at_cluster_start(inner_pytester: pytest.Pytester) -> None:
    inner_pytester.makefile(".yaml", **{"crds/one": yaml.safe_dump(crd("opt.example.com",
                                                                       "Widgetoid"))})
    inner_pytester.makefile(".yaml", **{"more/two": yaml.safe_dump(crd("opt.example.com",
                                                                       "Thingamajig"))})
    inner_pytester.makepyfile(test_inner="""
        def test_installed_before_the_test(k8s, namespace, api_calls):
            for kind in ("Widgetoid", "Thingamajig"):
                plural = kind.lower() + "s"
                k8s.custom.create_namespaced_custom_object(
                    "opt.example.com", "v1", namespace, plural,
                    {"apiVersion": "opt.example.com/v1", "kind": kind,
                     "metadata": {"name": "x"}, "spec": {}})
            # the option installed them when the cluster started, not during this test
            assert api_calls.count(resource="customresourcedefinitions") == 0
    """)
    result = inner_pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--envtest-crds", "crds",
        "--envtest-crds", "more/two.yaml", timeout=120)
    result.assert_outcomes(passed=1)


# -- apply ------------------------------------------------------------------------------


def test_apply_multi_document_yaml_lands_in_the_test_namespace(
        apply: Callable[..., list[dict[str, Any]]], k8s: Clients, namespace: str) -> None:
    applied = apply("""
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  mode: fast
---
apiVersion: v1
kind: Secret
metadata:
  name: credentials
stringData:
  token: abc
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  ports:
    - port: 80
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: pytest-envtest-apply-test
rules: []
""")
    assert [o["kind"] for o in applied] == ["ConfigMap", "Secret", "Service", "ClusterRole"]
    assert [o["metadata"].get("namespace") for o in applied] == [namespace] * 3 + [None]
    assert k8s.core.read_namespaced_config_map("settings", namespace).data == {"mode": "fast"}
    assert k8s.core.read_namespaced_secret("credentials", namespace).data["token"] == "YWJj"
    assert k8s.core.read_namespaced_service("web", namespace).spec.cluster_ip  # allocated
    managers = {m.manager for m in
                k8s.core.read_namespaced_config_map("settings", namespace).metadata.managed_fields}
    assert managers == {"pytest-envtest"}


def test_apply_dicts_lists_files_and_reapply(apply: Callable[..., list[dict[str, Any]]],
                                             k8s: Clients, namespace: str,
                                             tmp_path: Path) -> None:
    def config_map(name: str, **data: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
                "data": data}

    first = apply(config_map("from-dict", a="1"))[0]
    assert first["metadata"]["namespace"] == namespace
    listed = apply([config_map("from-list-1"), config_map("from-list-2")])
    assert [o["metadata"]["name"] for o in listed] == ["from-list-1", "from-list-2"]
    path = tmp_path / "cm.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List",
                                    "items": [config_map("from-file")]}))
    assert apply(path)[0]["metadata"]["namespace"] == namespace

    again = apply(config_map("from-dict", a="2", b="3"))[0]  # server-side apply updates
    assert again["metadata"]["uid"] == first["metadata"]["uid"]
    assert k8s.core.read_namespaced_config_map("from-dict", namespace).data == {"a": "2",
                                                                                 "b": "3"}
    names = {c.metadata.name for c in k8s.core.list_namespaced_config_map(namespace).items}
    assert names == {"from-dict", "from-list-1", "from-list-2", "from-file"}


def test_apply_malformed_manifest_gives_a_clear_error_and_applies_nothing(
        apply: Callable[..., list[dict[str, Any]]], k8s: Clients, namespace: str) -> None:
    with pytest.raises(ResourceError) as raised:
        apply("""
apiVersion: v1
kind: ConfigMap
metadata:
  name: valid-first
---
apiVersion: v1
metadata:
  name: kindless
""")
    assert "lacks kind" in str(raised.value)
    assert k8s.core.list_namespaced_config_map(namespace).items == []  # checked before sending

    with pytest.raises(ResourceError, match="not valid YAML"):
        apply("apiVersion: v1\nkind: [unclosed\n")
    # One line of YAML is YAML, not a path (it said "manifest path kind: [unclosed ... does
    # not exist"); a one-line path still is a path.
    with pytest.raises(ResourceError, match="manifest text is not valid YAML") as one_line:
        apply("kind: [unclosed")
    assert "does not exist" not in str(one_line.value)
    with pytest.raises(ResourceError, match="manifest path no/such/dir .*does not exist"):
        apply("no/such/dir")
    with pytest.raises(ResourceError, match="does not serve kind Nonexistent"):
        apply({"apiVersion": "v1", "kind": "Nonexistent", "metadata": {"name": "x"}})
    with pytest.raises(ResourceError) as rejected:
        apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "Not_Valid"}})
    assert "was rejected: HTTP 422" in str(rejected.value)
    assert "metadata.name: Invalid value" in str(rejected.value)


# -- installing once -------------------------------------------------------------------------


def _gizmo_crd(plural: str, extra_field: str | None = None) -> dict[str, Any]:
    properties: dict[str, Any] = {"size": {"type": "integer"}}
    if extra_field:
        properties[extra_field] = {"type": "string"}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"kind": plural.capitalize()[:-1], "plural": plural},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                       "spec": {"type": "object", "properties": properties}}}}}]}}


def test_installing_the_same_crds_again_costs_a_lookup_not_an_apply(
        k8s: Clients, install_crds: Any, api_calls: Any, tmp_path: Path) -> None:
    plural = f"gizmos{uuid.uuid4().hex[:6]}"
    path = tmp_path / "crd.yaml"
    path.write_text(yaml.safe_dump(_gizmo_crd(plural)))
    try:
        assert install_crds(path) == [f"{plural}.example.com"]
        first = api_calls.mark()
        # The framework's own work, as this thread's CPU time: wall time on a shared runner
        # counts its neighbours (52 ms under a second make test beside this one, load 15).
        started = time.thread_time()
        for _ in range(5):
            assert install_crds(path) == [f"{plural}.example.com"]
        per_install = (time.thread_time() - started) / 5
        assert api_calls.count(resource="customresourcedefinitions", since=first) == 0
        assert per_install < 0.05, f"{per_install * 1000:.0f} ms CPU per unchanged install"
        crd = k8s.apiextensions.read_custom_resource_definition(f"{plural}.example.com")
        assert crd.metadata.annotations["pytest-envtest/content-hash"]
    finally:
        uninstall_crds(k8s.api_client, [f"{plural}.example.com"])


def test_a_crd_file_that_changed_is_applied_again_never_served_stale(
        k8s: Clients, install_crds: Any, apply: Any, tmp_path: Path) -> None:
    plural = f"gizmos{uuid.uuid4().hex[:6]}"
    name = f"{plural}.example.com"
    path = tmp_path / "crd.yaml"
    path.write_text(yaml.safe_dump(_gizmo_crd(plural)))
    try:
        install_crds(path)
        path.write_text(yaml.safe_dump(_gizmo_crd(plural, extra_field="colour")))
        install_crds(path)
        served = k8s.apiextensions.read_custom_resource_definition(name)
        assert "colour" in served.spec.versions[0].schema.open_apiv3_schema.properties[
            "spec"].properties
        (gizmo,) = apply({"apiVersion": "example.com/v1", "kind": plural.capitalize()[:-1],
                          "metadata": {"name": "g"}, "spec": {"size": 1, "colour": "red"}})
        assert gizmo.spec.colour == "red"  # pruned if the old schema were served

        # Deleted behind the framework's back: installed again, not assumed.
        uninstall_crds(k8s.api_client, [name])
        assert install_crds(path) == [name]
        assert k8s.apiextensions.read_custom_resource_definition(name).metadata.name == name
    finally:
        uninstall_crds(k8s.api_client, [name])
