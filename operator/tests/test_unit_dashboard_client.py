"""Error classification of the Dashboard client against the fake over loopback HTTP."""

import pytest

from ray_operator.dashboard import (
    DashboardClient,
    DashboardHTTPError,
    DashboardInvalidJSON,
    DashboardTimeout,
    DashboardUnreachable,
    JobAlreadyExists,
    default_dashboard_resolver,
    new_http_client,
)
from ray_operator.testing import FakeRayDashboard

CONFIG = {"applications": [{"name": "app", "import_path": "m:app", "deployments": [{"name": "D"}]}]}


@pytest.fixture
def fake():
    with FakeRayDashboard() as dashboard:
        yield dashboard


@pytest.fixture
def client(fake):
    with new_http_client(1.0) as http:
        yield DashboardClient(fake.url, http)


def test_default_resolver_uses_cluster_dns():
    assert (
        default_dashboard_resolver("ns", "rc", "rc-head-svc")
        == "http://rc-head-svc.ns.svc.cluster.local:8265"
    )


def test_refused_is_unreachable(client):
    with pytest.raises(DashboardUnreachable) as info:
        client.get_serve_applications()
    assert not isinstance(info.value, DashboardTimeout)


def test_serve_round_trip(fake, client):
    fake.start()
    client.update_serve_applications(CONFIG)
    apps = client.get_serve_applications()
    assert apps["app"].status == "RUNNING"
    assert apps["app"].deployments["D"].status == "HEALTHY"
    assert fake.requests("PUT")[0].body == CONFIG


def test_http_error_carries_status_and_body(fake, client):
    fake.start()
    with pytest.raises(DashboardHTTPError) as info:
        client.update_serve_applications({"applications": "nope"})
    assert info.value.status_code == 400
    assert "not a valid list" in info.value.body
    fake.fail_with(500, count=1, body="internal trouble")
    with pytest.raises(DashboardHTTPError) as info:
        client.get_serve_applications()
    assert (info.value.status_code, info.value.body) == (500, "internal trouble")


def test_invalid_json(fake, client):
    fake.start()
    fake.fail_with(200, count=1, body="<html>not json</html>")
    with pytest.raises(DashboardInvalidJSON):
        client.get_serve_applications()


def test_timeout(fake, client):
    fake.start()
    fake.set_delay(2.0)
    with pytest.raises(DashboardTimeout):
        client.get_serve_applications()


def test_jobs(fake, client):
    fake.start()
    assert client.get_job("j-1") is None
    assert client.submit_job(job_id="j-1", entrypoint="python x.py", runtime_env={"a": 1}) == "j-1"
    body = fake.requests("POST", "/api/jobs/")[0].body
    assert body["submission_id"] == body["job_id"] == "j-1"
    with pytest.raises(JobAlreadyExists):
        client.submit_job(job_id="j-1", entrypoint="python x.py")
    fake.set_job_status("j-1", "SUCCEEDED", "done")
    info = client.get_job("j-1")
    assert (info.status, info.message) == ("SUCCEEDED", "done")
    assert info.end_time_ms
    assert client.stop_job("j-1") is False


def test_env_proxies_are_ignored(fake, monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("NO_PROXY", "")
    fake.start()
    with new_http_client(1.0) as http:
        assert DashboardClient(fake.url, http).get_serve_applications() == {}
