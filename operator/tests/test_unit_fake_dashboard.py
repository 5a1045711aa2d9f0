"""The fake Dashboard over real loopback HTTP."""

import threading

import httpx
import pytest

from ray_operator.testing import FakeRayDashboard, ServePolicy

CONFIG = {
    "applications": [
        {
            "name": "fruit_app",
            "import_path": "fruit.deployment_graph",
            "route_prefix": "/fruit",
            "deployments": [{"name": "MangoStand"}, {"name": "OrangeStand"}, {"name": "PearStand"}],
        }
    ]
}


@pytest.fixture
def fake():
    with FakeRayDashboard() as dashboard:
        yield dashboard


def get(fake, path, **kw):
    return httpx.get(fake.url + path, timeout=5, **kw)


def test_refuses_until_started_and_keeps_its_port(fake):
    port = fake.port
    with pytest.raises(httpx.ConnectError):
        get(fake, "/api/serve/applications/")
    fake.start()
    assert get(fake, "/api/serve/applications/").status_code == 200
    fake.refuse()
    with pytest.raises(httpx.ConnectError):
        get(fake, "/api/serve/applications/")
    fake.start()
    assert fake.port == port
    assert get(fake, "/api/serve/applications/").status_code == 200
    assert [t[1] for t in fake.transitions] == ["started", "refusing", "started"]


def test_refused_requests_are_not_journaled(fake):
    with pytest.raises(httpx.ConnectError):
        get(fake, "/api/serve/applications/")
    assert fake.journal == []


def test_serve_submission_makes_applications_appear(fake):
    fake.start()
    assert get(fake, "/api/serve/applications/").json()["applications"] == {}
    response = httpx.put(fake.url + "/api/serve/applications/", json=CONFIG, timeout=5)
    assert response.status_code == 200
    apps = get(fake, "/api/serve/applications/").json()["applications"]
    assert apps["fruit_app"]["status"] == "RUNNING"
    assert {d: v["status"] for d, v in apps["fruit_app"]["deployments"].items()} == {
        "MangoStand": "HEALTHY",
        "OrangeStand": "HEALTHY",
        "PearStand": "HEALTHY",
    }
    fake.set_deployment_status("fruit_app", "PearStand", "UNHEALTHY", "replica crashed")
    pear = get(fake, "/api/serve/applications/").json()["applications"]["fruit_app"]["deployments"]
    assert pear["PearStand"] == {
        "name": "PearStand",
        "status": "UNHEALTHY",
        "message": "replica crashed",
        "replicas": [],
    }
    assert fake.serve_config == CONFIG


def test_serve_policy_reports_initial_statuses_first(fake):
    fake.serve_policy = ServePolicy(ready_after_seconds=60)
    fake.start()
    httpx.put(fake.url + "/api/serve/applications/", json=CONFIG, timeout=5)
    app = fake.applications()["fruit_app"]
    assert app["status"] == "DEPLOYING"
    assert {d["status"] for d in app["deployments"].values()} == {"UPDATING"}
    fake.serve_policy = ServePolicy(ready_after_seconds=0)
    assert fake.applications()["fruit_app"]["status"] == "RUNNING"


def test_resubmitting_the_same_config_keeps_state(fake):
    fake.start()
    httpx.put(fake.url + "/api/serve/applications/", json=CONFIG, timeout=5)
    fake.set_app_status("fruit_app", "UNHEALTHY")
    httpx.put(fake.url + "/api/serve/applications/", json=CONFIG, timeout=5)
    assert fake.applications()["fruit_app"]["status"] == "UNHEALTHY"


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (b"{not json", "not valid JSON"),
        (b"[]", "valid dict"),
        (b"{}", "applications\n  field required"),
        (b'{"applications": [{"name": "a"}]}', "import_path"),
        (
            b'{"applications": [{"name": "a", "import_path": "x"},'
            b' {"name": "a", "import_path": "y", "route_prefix": "/y"}]}',
            "multiple configs for application a",
        ),
    ],
)
def test_malformed_serve_configs_get_400(fake, body, needle):
    fake.start()
    response = httpx.put(
        fake.url + "/api/serve/applications/",
        content=body,
        headers={"Content-Type": "application/json"},
        timeout=5,
    )
    assert response.status_code == 400
    assert needle in response.text
    assert fake.serve_config is None
    assert fake.journal[-1].status == 400


def test_jobs_lifecycle(fake):
    fake.start()
    url = fake.url + "/api/jobs/"
    body = {"entrypoint": "python x.py", "submission_id": "job-1", "metadata": {"k": "v"}}
    assert httpx.post(url, json=body, timeout=5).json() == {
        "job_id": "job-1",
        "submission_id": "job-1",
    }
    again = httpx.post(url, json=body, timeout=5)
    assert again.status_code == 400 and "already exists" in again.text
    assert get(fake, "/api/jobs/job-1").json()["status"] == "PENDING"
    fake.set_job_status("job-1", "RUNNING")
    assert get(fake, "/api/jobs/job-1").json()["status"] == "RUNNING"
    assert httpx.post(url + "job-1/stop", timeout=5).json() == {"stopped": True}
    info = get(fake, "/api/jobs/job-1").json()
    assert info["status"] == "STOPPED" and info["end_time"]
    assert httpx.post(url + "job-1/stop", timeout=5).json() == {"stopped": False}
    assert get(fake, "/api/jobs/nope").status_code == 404
    assert httpx.post(url + "nope/stop", timeout=5).status_code == 404
    assert httpx.post(url, json={"submission_id": "x"}, timeout=5).status_code == 400


def test_fault_injection(fake):
    fake.start()
    fake.fail_with(503, count=2)
    codes = [get(fake, "/api/serve/applications/").status_code for _ in range(3)]
    assert codes == [503, 503, 200]
    fake.set_delay(0.3)
    with pytest.raises(httpx.ReadTimeout):
        httpx.get(fake.url + "/api/serve/applications/", timeout=0.1)
    fake.clear_faults()
    assert get(fake, "/api/serve/applications/").status_code == 200


def test_journal_and_wait_for_request(fake):
    fake.start()
    waiter_result = []

    def waiter():
        waiter_result.extend(fake.wait_for_request("PUT", "/api/serve", timeout=5))

    thread = threading.Thread(target=waiter)
    thread.start()
    get(fake, "/api/serve/applications/?x=1")
    httpx.put(fake.url + "/api/serve/applications/", json=CONFIG, timeout=5)
    thread.join(5)
    assert [e.method for e in waiter_result] == ["PUT"]
    assert waiter_result[0].body == CONFIG and waiter_result[0].status == 200
    first = fake.journal[0]
    assert (first.method, first.path, first.query, first.body) == (
        "GET",
        "/api/serve/applications/",
        "x=1",
        None,
    )
    assert [e.seq for e in fake.journal] == [1, 2]
    assert len(fake.requests(method="GET")) == 1
    with pytest.raises(TimeoutError, match="got: GET /api/serve/applications/, PUT"):
        fake.wait_for_request("POST", timeout=0.05)


def test_stop_releases_the_port():
    fake = FakeRayDashboard().start()
    port = fake.port
    fake.stop()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/", timeout=2)
    with pytest.raises(RuntimeError):
        fake.start()


def test_bulk_status_setters_and_clearing_the_journal(fake):
    fake.start()
    httpx.put(fake.url + "/api/serve/applications/", json=CONFIG, timeout=5)
    fake.set_serve_statuses(app_status="DEPLOY_FAILED", deployment_status="UNHEALTHY", message="x")
    app = get(fake, "/api/serve/applications/").json()["applications"]["fruit_app"]
    assert (app["status"], app["message"]) == ("DEPLOY_FAILED", "x")
    assert {d["status"] for d in app["deployments"].values()} == {"UNHEALTHY"}
    with pytest.raises(ValueError):
        fake.set_app_status("fruit_app", "BROKEN")
    with pytest.raises(KeyError):
        fake.set_app_status("nope", "RUNNING")
    fake.clear_journal()
    assert fake.journal == []
    httpx.post(fake.url + "/api/jobs/", json={"entrypoint": "x", "submission_id": "j"}, timeout=5)
    assert [j["job_id"] for j in get(fake, "/api/jobs/").json()] == ["j"]
    assert [e.seq for e in fake.journal] == [3, 4]  # numbering goes on after clearing
