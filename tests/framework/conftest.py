"""Fixtures shared by the framework tests; plain helpers are in framework_helpers.py."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from framework_helpers import REAL_DATA_HOME, WIDGET_CRD


@pytest.fixture(scope="session", autouse=True)
def kubectl_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """kubectl run by the tests keeps its discovery cache in the run's temporary dir, not in
    ~/.kube/cache (the framework's own kubectl calls do so by themselves)."""
    patch = pytest.MonkeyPatch()
    patch.setenv("KUBECACHEDIR", str(tmp_path_factory.mktemp("kube-cache")))
    yield
    patch.undo()


@pytest.fixture
def widget_crd(install_crds: Callable[..., list[str]]) -> str:
    """The Widget CRD, installed (idempotent: one apply per test, no-op after the first)."""
    return install_crds(WIDGET_CRD)[0]


def _pytester(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Any:
    pytester = request.getfixturevalue("pytester")
    monkeypatch.setenv("XDG_DATA_HOME", REAL_DATA_HOME)
    monkeypatch.setenv("ENVTEST_INSTALLED_ONLY", "1")
    # The inner run is a session of its own, even when this one is an xdist worker.
    for variable in ("ENVTEST_ARTIFACTS", "USE_EXISTING_CLUSTER", "ENVTEST_BACKEND",
                     "PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT",
                     "PYTEST_XDIST_TESTRUNUID", "PYTEST_ADDOPTS", "ENVTEST_ATTACH",
                     "ENVTEST_SHARE_PLANES"):
        monkeypatch.delenv(variable, raising=False)
    return pytester


@pytest.fixture
def inner_pytester(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Any:
    """``pytester`` whose subprocess runs find the cached binaries, never build any, and
    use this worker's session plane for their default cluster (``--envtest-attach``): an
    inner session starts no plane of its own for it, seconds of CPU saved per run.  This
    worker waits for the inner run, so nothing else writes to the plane meanwhile.

    Modules using it declare ``pytest_plugins = ["pytester"]``.  A test whose inner run is
    about a plane of its own (its start, stop, logs, death, kept clusters) or runs several
    workers on it uses :func:`own_plane_pytester`.
    """
    pytester = _pytester(request, monkeypatch)
    session_plane = request.getfixturevalue("envtest_session")
    monkeypatch.setenv("ENVTEST_ATTACH", str(session_plane.share()))
    return pytester


@pytest.fixture
def own_plane_pytester(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Any:
    """``inner_pytester`` whose inner sessions start their own control planes."""
    return _pytester(request, monkeypatch)
