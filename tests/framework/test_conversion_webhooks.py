"""CRD conversion webhooks written in the test: a two-version CRD converted by a Python handler,
served on loopback and called by the real apiserver; storage-version switches; bad handlers."""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml
from framework_helpers import LineReader
from kubernetes.client.rest import ApiException

import envtest
from envtest import ResourceError, conversion

GROUP = "conversion.example.com"


def person_crd(plural: str, kind: str, storage: str = "v1",
               strategy: str = "Webhook") -> dict[str, Any]:
    """v1alpha1 says ``spec.fullName``, v1 ``spec.firstName`` and ``spec.lastName``."""
    def version(name: str, fields: dict[str, Any]) -> dict[str, Any]:
        return {"name": name, "served": True, "storage": name == storage,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": fields}}}}}

    crd: dict[str, Any] = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
            "versions": [version("v1alpha1", {"fullName": {"type": "string"}}),
                         version("v1", {"firstName": {"type": "string"},
                                        "lastName": {"type": "string"}})],
        },
    }
    if strategy == "Webhook":
        # As an operator ships it: a Service the framework rewrites to its loopback URL.
        crd["spec"]["conversion"] = {"strategy": "Webhook", "webhook": {
            "clientConfig": {"service": {"name": "webhook-service", "namespace": "system",
                                         "path": "/convert"}},
            "conversionReviewVersions": ["v1"]}}
    return crd


def convert_person(obj: dict[str, Any], desired: str) -> dict[str, Any]:
    spec = obj.get("spec") or {}
    if desired == f"{GROUP}/v1":
        first, _, last = spec.pop("fullName", "").partition(" ")
        spec.update(firstName=first, lastName=last)
    else:
        spec["fullName"] = f"{spec.pop('firstName', '')} {spec.pop('lastName', '')}".strip()
    obj["spec"] = spec
    return obj


def convert(request: dict[str, Any]) -> dict[str, Any]:
    return conversion.convert_each(request, convert_person)


def person(kind: str, version: str, name: str, **spec: str) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{version}", "kind": kind, "metadata": {"name": name},
            "spec": spec}


PEOPLE = person_crd("people", "Person")


@pytest.fixture
def people(webhooks):
    webhooks.route("/convert", convert).install(PEOPLE)
    return webhooks


def test_objects_created_in_each_version_read_in_the_other(people, k8s, namespace):
    custom = k8s.custom
    custom.create_namespaced_custom_object(GROUP, "v1alpha1", namespace, "people",
                                           person("Person", "v1alpha1", "ada",
                                                  fullName="Ada Lovelace"))
    custom.create_namespaced_custom_object(GROUP, "v1", namespace, "people",
                                           person("Person", "v1", "grace", firstName="Grace",
                                                  lastName="Hopper"))

    ada = custom.get_namespaced_custom_object(GROUP, "v1", namespace, "people", "ada")
    assert (ada["apiVersion"], ada["spec"]) == (
        f"{GROUP}/v1", {"firstName": "Ada", "lastName": "Lovelace"})
    grace = custom.get_namespaced_custom_object(GROUP, "v1alpha1", namespace, "people", "grace")
    assert (grace["apiVersion"], grace["spec"]) == (f"{GROUP}/v1alpha1",
                                                    {"fullName": "Grace Hopper"})
    listed = custom.list_namespaced_custom_object(GROUP, "v1alpha1", namespace, "people")
    assert sorted(p["spec"]["fullName"] for p in listed["items"]) == ["Ada Lovelace",
                                                                      "Grace Hopper"]
    calls = people.calls("/convert")
    assert {c.kind for c in calls} == {"ConversionReview"}
    assert {c.request["desiredAPIVersion"] for c in calls} == {f"{GROUP}/v1",
                                                               f"{GROUP}/v1alpha1"}


def test_the_crd_converts_through_the_tests_server(people, k8s):
    crd = k8s.apiextensions.read_custom_resource_definition(f"people.{GROUP}")
    client_config = crd.spec.conversion.webhook.client_config
    assert client_config.service is None
    assert client_config.url == people.server.url("/convert")
    assert client_config.ca_bundle


def test_the_storage_version_switches_and_both_read_in_both(webhooks, k8s, namespace):
    custom = k8s.custom
    webhooks.route("/convert", convert).install(person_crd("patrons", "Patron", storage="v1alpha1"))
    custom.create_namespaced_custom_object(GROUP, "v1alpha1", namespace, "patrons",
                                           person("Patron", "v1alpha1", "ada",
                                                  fullName="Ada Lovelace"))
    webhooks.install(person_crd("patrons", "Patron", storage="v1"))
    custom.create_namespaced_custom_object(GROUP, "v1", namespace, "patrons",
                                           person("Patron", "v1", "grace", firstName="Grace",
                                                  lastName="Hopper"))
    crd = k8s.apiextensions.read_custom_resource_definition(f"patrons.{GROUP}")
    assert crd.status.stored_versions == ["v1alpha1", "v1"]

    def read(version: str, name: str) -> dict[str, Any]:
        return custom.get_namespaced_custom_object(GROUP, version, namespace, "patrons",
                                                   name)["spec"]

    assert read("v1alpha1", "ada") == {"fullName": "Ada Lovelace"}
    assert read("v1", "grace") == {"firstName": "Grace", "lastName": "Hopper"}
    assert read("v1", "ada") == {"firstName": "Ada", "lastName": "Lovelace"}
    assert read("v1alpha1", "grace") == {"fullName": "Grace Hopper"}

    def converted_from(name: str) -> set[str]:
        """The versions the apiserver converted ``name`` from: the one it is stored in (its
        watch caches, one per version, convert in the background too)."""
        return {o["apiVersion"] for c in webhooks.calls("/convert")
                for o in c.request["objects"] if o["metadata"]["name"] == name}

    assert converted_from("ada") == {f"{GROUP}/v1alpha1"}
    assert converted_from("grace") == {f"{GROUP}/v1"}


def test_a_multi_version_crd_without_a_webhook_switches_its_storage_version(install_crds, k8s,
                                                                             namespace):
    custom = k8s.custom
    install_crds(person_crd("members", "Member", storage="v1alpha1", strategy="None"))
    custom.create_namespaced_custom_object(GROUP, "v1alpha1", namespace, "members",
                                           person("Member", "v1alpha1", "ada",
                                                  fullName="Ada Lovelace"))
    install_crds(person_crd("members", "Member", storage="v1", strategy="None"))
    custom.create_namespaced_custom_object(GROUP, "v1", namespace, "members",
                                           person("Member", "v1", "grace", firstName="Grace"))
    crd = k8s.apiextensions.read_custom_resource_definition(f"members.{GROUP}")
    assert crd.status.stored_versions == ["v1alpha1", "v1"]
    # Strategy None: only apiVersion changes (fields unknown to a version are pruned).
    ada = custom.get_namespaced_custom_object(GROUP, "v1", namespace, "members", "ada")
    assert (ada["apiVersion"], ada["spec"]) == (f"{GROUP}/v1", {})
    grace = custom.get_namespaced_custom_object(GROUP, "v1alpha1", namespace, "members", "grace")
    assert (grace["apiVersion"], grace["spec"]) == (f"{GROUP}/v1alpha1", {})
    assert custom.get_namespaced_custom_object(GROUP, "v1alpha1", namespace, "members",
                                               "ada")["spec"] == {"fullName": "Ada Lovelace"}


def _create_fails(k8s, namespace: str) -> str:
    """The message of a create in v1alpha1: stored in v1, it converts there and then."""
    with pytest.raises(ApiException) as failed:
        k8s.custom.create_namespaced_custom_object(
            GROUP, "v1alpha1", namespace, "people",
            person("Person", "v1alpha1", "ada", fullName="Ada Lovelace"))
    return json.loads(failed.value.body)["message"]


def test_a_handler_that_raises_fails_the_request_with_its_error(people, k8s, namespace):
    def broken(request: dict[str, Any]) -> dict[str, Any]:
        raise ValueError("cannot split this name")

    people.route("/convert", broken)
    message = _create_fails(k8s, namespace)
    assert "conversion webhook for conversion.example.com/v1alpha1" in message
    assert "conversion handler /convert raised ValueError('cannot split this name')" in message


def test_a_handler_that_returns_the_wrong_number_of_objects_fails_the_request(people, k8s,
                                                                              namespace):
    people.route("/convert", lambda request: conversion.converted([]))
    assert "conversion handler /convert returned 0 objects for 1" in _create_fails(
        k8s, namespace)

    def twice(request: dict[str, Any]) -> list[dict[str, Any]]:  # a plain list is accepted
        done = convert(request)["convertedObjects"]
        return done + copy.deepcopy(done)

    people.route("/convert", twice)
    assert "returned 2 objects for 1" in _create_fails(k8s, namespace)
    people.route("/convert", lambda request: conversion.failed("refused by the test"))
    assert "refused by the test" in _create_fails(k8s, namespace)
    people.route("/convert", convert)  # and a good one converts again
    k8s.custom.create_namespaced_custom_object(
        GROUP, "v1alpha1", namespace, "people",
        person("Person", "v1alpha1", "ada", fullName="Ada Lovelace"))


def test_a_conversion_path_without_a_route_is_refused_with_the_routes(webhooks):
    webhooks.route("/convert-people", convert)
    with pytest.raises(ResourceError, match=r"CRD people.conversion.example.com's conversion "
                       r"webhook calls /convert, but the test's server has handlers only for "
                       r"\['/convert-people'\]"):
        webhooks.install(PEOPLE)


def test_install_crds_routes_conversion_through_the_tests_server(webhooks, install_crds, k8s,
                                                                 namespace):
    with pytest.raises(ResourceError, match=r"has handlers only for \[\]: add one with "
                       r"webhooks.route\('/convert', handler\)"):
        install_crds(PEOPLE)
    webhooks.route("/convert", convert)
    assert install_crds(PEOPLE) == [f"people.{GROUP}"]
    k8s.custom.create_namespaced_custom_object(GROUP, "v1", namespace, "people",
                                               person("Person", "v1", "grace",
                                                      firstName="Grace", lastName="Hopper"))
    assert k8s.custom.get_namespaced_custom_object(
        GROUP, "v1alpha1", namespace, "people", "grace")["spec"] == {"fullName": "Grace Hopper"}


def test_the_frameworks_own_changes_are_its_own_user_left_out_of_the_tests_calls(
        webhooks, install_crds, k8s, namespace, api_calls):
    """The conversion pointed at the test's server and the probes that prove it in use are
    the framework's, not the test's (before: all of them under envtest-admin, the test's
    own user, in its API calls and its timeline)."""
    webhooks.route("/convert", convert)
    install_crds(person_crd("members", "Member"))
    k8s.core.create_namespaced_config_map(namespace, {"metadata": {"name": "mine"}})
    framework = "pytest-envtest:framework"
    theirs = api_calls.calls(user=framework, writes_only=True)
    assert {c.resource for c in theirs} >= {"customresourcedefinitions", "conversionprobes"}
    mine = api_calls.calls(writes_only=True)
    assert framework not in {c.user for c in mine}
    assert not [c for c in mine if c.resource in ("customresourcedefinitions",
                                                   "conversionprobes")], mine
    assert [(c.verb, c.resource, c.name) for c in mine if c.resource == "configmaps"] == [
        ("create", "configmaps", "mine")]


@pytest.mark.envtest_crds(person_crd("guests", "Guest"), conversion={"/convert": convert})
def test_the_marker_installs_a_conversion_crd_with_its_handler(k8s, namespace):
    k8s.custom.create_namespaced_custom_object(GROUP, "v1alpha1", namespace, "guests",
                                               person("Guest", "v1alpha1", "ada",
                                                      fullName="Ada Lovelace"))
    ada = k8s.custom.get_namespaced_custom_object(GROUP, "v1", namespace, "guests", "ada")
    assert ada["spec"] == {"firstName": "Ada", "lastName": "Lovelace"}


def test_a_service_conversion_webhook_without_a_server_is_refused_with_the_fix(envtest_session):
    cluster = envtest_session
    with pytest.raises(ResourceError, match=r"converts its versions through a webhook at the "
                       r"Service system/webhook-service \(path /convert\).*webhooks.route\("
                       r"'/convert', handler\).install\(crd\)"):
        envtest.install_crds(cluster.api_client(), [person_crd("visitors", "Visitor")])



def test_at_teardown_the_conversion_goes_back_to_none_and_objects_stay_readable(webhooks, k8s,
                                                                                 namespace):
    webhooks.route("/convert", convert).install(person_crd("hosts", "Host"))
    k8s.custom.create_namespaced_custom_object(GROUP, "v1alpha1", namespace, "hosts",
                                               person("Host", "v1alpha1", "ada",
                                                      fullName="Ada Lovelace"))
    webhooks.close()  # what the fixture's teardown does: its server is gone after this
    crd = k8s.apiextensions.read_custom_resource_definition(f"hosts.{GROUP}")
    assert (crd.spec.conversion.strategy, crd.spec.conversion.webhook) == ("None", None)
    # The namespace's cleanup reads and deletes them in any version: no server needed.
    for version in ("v1", "v1alpha1"):
        listed = k8s.custom.list_namespaced_custom_object(GROUP, version, namespace, "hosts")
        assert [item["metadata"]["name"] for item in listed["items"]] == ["ada"]


# -- envtest up: what works from the command line ------------------------------------------

ENVTEST_CLI = Path(sys.executable).parent / "envtest"


def _reset_signals() -> None:
    """``envtest up`` is stopped by SIGINT: not ignored, whatever this run inherited."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _up(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    crd = tmp_path / "crd.yaml"
    crd.write_text(yaml.safe_dump(person_crd("cliguests", "CliGuest")))
    return subprocess.Popen(
        [str(ENVTEST_CLI), "up", "--crd", str(crd), "--kubeconfig-out",
         str(tmp_path / "kubeconfig"), *args], stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, preexec_fn=_reset_signals,
        env={**os.environ, "ENVTEST_INSTALLED_ONLY": "1", "COLUMNS": "400"})


@pytest.mark.parametrize(("args", "says"), [
    ((), ("CRD cliguests.conversion.example.com converts its versions through a webhook at "
          "the Service system/webhook-service", "--without-conversion",
          "--conversion-url https://127.0.0.1:9443/convert", "--conversion-ca")),
    (("--conversion-url", "http://127.0.0.1:9443/convert"), ("over HTTPS only",)),
], ids=["no-way-given", "plain-http"])
def test_envtest_up_refuses_a_service_conversion_with_what_works_from_the_cli(
        tmp_path: Path, args: tuple[str, ...], says: tuple[str, ...]) -> None:
    """Before: the library's advice, webhooks.route(...), which no shell can follow."""
    up = _up(tmp_path, *args)
    output, _ = up.communicate(timeout=120)
    assert up.returncode == 1, output
    flat = " ".join(output.split())
    assert flat.startswith("envtest: error:"), output
    for words in says:
        assert words in flat, (words, output)
    assert "webhooks.route" not in flat and "Traceback" not in output
    assert not (tmp_path / "kubeconfig").exists()  # nothing started


def test_envtest_up_serves_a_service_conversion_crd_without_conversion(tmp_path: Path) -> None:
    up = _up(tmp_path, "--without-conversion")
    reader = LineReader(up)
    try:
        reader.wait_for("Press Ctrl-C", timeout=180)
        api = kubernetes.config.new_client_from_config(str(tmp_path / "kubeconfig"))
        try:
            crd = kubernetes.client.ApiextensionsV1Api(api).read_custom_resource_definition(
                f"cliguests.{GROUP}")
            assert crd.spec.conversion.strategy == "None"
            custom = kubernetes.client.CustomObjectsApi(api)
            custom.create_namespaced_custom_object(GROUP, "v1alpha1", "default", "cliguests",
                                                   person("CliGuest", "v1alpha1", "ada",
                                                          fullName="Ada Lovelace"))
            as_v1 = custom.get_namespaced_custom_object(GROUP, "v1", "default", "cliguests",
                                                        "ada")
            # No conversion: only apiVersion changes (v1's schema prunes fullName away).
            assert (as_v1["apiVersion"], as_v1["spec"]) == (f"{GROUP}/v1", {})
        finally:
            api.close()
    finally:
        up.send_signal(signal.SIGINT)
        assert up.wait(timeout=60) == 0
