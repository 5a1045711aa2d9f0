import json

import httpx
import pytest

from ray_operator.testing import MAP_ENV, FakeDashboardFleet, FileResolver, file_resolver
from ray_operator.testing.mapfile import write_dashboard_map


def test_file_resolver_rereads_on_change(tmp_path):
    path = tmp_path / "map.json"
    write_dashboard_map(path, {"ns/a": "http://127.0.0.1:1"})
    resolver = FileResolver(path)
    assert resolver("ns", "a", "a-head-svc") == "http://127.0.0.1:1"
    with pytest.raises(LookupError, match="ns/b"):
        resolver("ns", "b", "b-head-svc")
    write_dashboard_map(path, {"ns/a": "http://127.0.0.1:1", "ns/b": "http://127.0.0.1:2"})
    assert resolver("ns", "b", "b-head-svc") == "http://127.0.0.1:2"


def test_module_resolver_reads_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv(MAP_ENV, raising=False)
    with pytest.raises(LookupError, match=MAP_ENV):
        file_resolver("ns", "a", "a-head-svc")
    path = tmp_path / "map.json"
    write_dashboard_map(path, {"ns/a": "http://127.0.0.1:3"})
    monkeypatch.setenv(MAP_ENV, str(path))
    assert file_resolver("ns", "a", "a-head-svc") == "http://127.0.0.1:3"


def test_fleet_creates_dashboards_on_demand_and_keeps_the_map(tmp_path):
    path = tmp_path / "map.json"
    with FakeDashboardFleet(map_file=path) as fleet:
        url = fleet.resolver("default", "rc-1", "rc-1-head-svc")
        assert fleet["rc-1"].url == url == fleet["default/rc-1"].url
        assert "rc-1" in fleet and "rc-2" not in fleet
        assert json.loads(path.read_text()) == {"default/rc-1": url}
        with pytest.raises(httpx.ConnectError):
            httpx.get(url + "/api/serve/applications/", timeout=2)
        fleet["rc-1"].start()
        fleet["rc-2"].start()
        httpx.get(fleet["rc-2"].url + "/api/jobs/x", timeout=2)
        httpx.get(url + "/api/serve/applications/", timeout=2)
        assert [(c, e.path) for c, e in fleet.all_requests()] == [
            ("default/rc-2", "/api/jobs/x"),
            ("default/rc-1", "/api/serve/applications/"),
        ]
        assert FileResolver(path)("default", "rc-2", "") == fleet["rc-2"].url


def test_fleet_auto_start():
    with FakeDashboardFleet(auto_start=True) as fleet:
        url = fleet.resolver("ns", "rc", "rc-head-svc")
        assert httpx.get(url + "/api/serve/applications/", timeout=2).status_code == 200
