"""The lean footprint names only API versions the binary registers: kube-apiserver refuses to
start on one it does not know ("group version storagemigration.k8s.io/v1 that has not been
registered" on 1.34-1.36, found by `make matrix`)."""

from __future__ import annotations

import pytest

from envtest.controlplane.components.footprint import apiserver_flags, go_env


def _disabled(minor: int | None, scheduler: bool = False) -> set[str]:
    config = apiserver_flags("lean", scheduler, minor)["runtime-config"]
    return {item.removesuffix("=false") for item in config.split(",")}


@pytest.mark.parametrize("minor", [34, 35, 36])
def test_storagemigration_v1_is_left_alone_before_1_37(minor: int) -> None:
    assert _disabled(minor) == {"flowcontrol.apiserver.k8s.io/v1", "resource.k8s.io/v1",
                                "node.k8s.io/v1"}


def test_1_37_also_drops_storagemigration_v1() -> None:
    assert "storagemigration.k8s.io/v1" in _disabled(37)


def test_an_unknown_version_gets_what_every_supported_minor_registers() -> None:
    # What 1.29 to 1.37 all serve: a version only some register would stop the others.
    assert _disabled(None) == {"flowcontrol.apiserver.k8s.io/v1", "node.k8s.io/v1"}


@pytest.mark.parametrize(("minor", "v1beta3"), [(29, True), (31, True), (32, False)])
def test_flowcontrol_v1beta3_is_turned_off_while_it_is_served(minor: int, v1beta3: bool) -> None:
    # Left on (1.29 to 1.31), its group's post-start hook fails and /readyz is never ready.
    assert ("flowcontrol.apiserver.k8s.io/v1beta3" in _disabled(minor)) is v1beta3


def test_the_scheduler_keeps_dynamic_resource_allocation() -> None:
    assert "resource.k8s.io/v1" not in _disabled(37, scheduler=True)
    assert apiserver_flags("full", False, 37) == {}


def test_lean_asks_for_gogc_50_unless_the_environment_sets_it(monkeypatch) -> None:
    # `make test` sets GOGC for its own planes: the default is checked here, where no
    # environment decides it.
    monkeypatch.delenv("GOGC", raising=False)
    assert go_env("lean") == {"GOGC": "50"}
    assert go_env("full") == {}
    monkeypatch.setenv("GOGC", "400")
    assert go_env("lean") == {}
