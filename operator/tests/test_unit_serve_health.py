from datetime import UTC, datetime, timedelta

from ray_operator.controllers.serve_health import evaluate_serve
from ray_operator.dashboard import AppStatus, DeploymentStatus
from ray_operator.runtime.timeutil import format_rfc3339

NOW = datetime(2024, 5, 10, 6, 45, 0, tzinfo=UTC)


def app(status="RUNNING", **deployments):
    return {
        "app": AppStatus(
            "app",
            status,
            deployments={n: DeploymentStatus(n, s) for n, s in deployments.items()},
        )
    }


def run(apps, previous=None, now=NOW, threshold=60.0):
    return evaluate_serve(
        apps,
        previous or {},
        now=now,
        app_threshold_seconds=threshold,
        deployment_threshold_seconds=threshold,
    )


def test_running_and_healthy_is_ready():
    health = run(app(a="HEALTHY", b="HEALTHY"))
    assert health.healthy and health.ready
    entry = health.applications["app"]
    assert entry["status"] == "RUNNING"
    assert set(entry["serveDeploymentStatuses"]) == {"a", "b"}


def test_not_running_or_not_healthy_is_not_ready_but_healthy():
    for apps in (app("DEPLOYING", a="HEALTHY"), app("RUNNING", a="UPDATING"), {}):
        health = run(apps)
        assert health.healthy and not health.ready


def test_unhealthy_within_threshold_is_still_healthy_and_keeps_its_start_time():
    first = run(app(a="UNHEALTHY"))
    assert first.healthy and not first.ready
    started = first.applications["app"]["serveDeploymentStatuses"]["a"]["healthLastUpdateTime"]
    assert started == format_rfc3339(NOW)
    later = run(app(a="UNHEALTHY"), first.applications, now=NOW + timedelta(seconds=30))
    assert later.healthy
    kept = later.applications["app"]["serveDeploymentStatuses"]["a"]["healthLastUpdateTime"]
    assert kept == started


def test_unhealthy_beyond_threshold_is_not_healthy():
    first = run(app(a="UNHEALTHY"))
    later = run(app(a="UNHEALTHY"), first.applications, now=NOW + timedelta(seconds=61))
    assert not later.healthy and not later.ready


def test_app_deploy_failed_uses_its_own_threshold():
    first = evaluate_serve(
        app("DEPLOY_FAILED"), {}, now=NOW, app_threshold_seconds=5, deployment_threshold_seconds=600
    )
    later = evaluate_serve(
        app("DEPLOY_FAILED"),
        first.applications,
        now=NOW + timedelta(seconds=6),
        app_threshold_seconds=5,
        deployment_threshold_seconds=600,
    )
    assert first.healthy and not later.healthy


def test_recovery_resets_the_clock():
    first = run(app(a="UNHEALTHY"))
    healthy = run(app(a="HEALTHY"), first.applications, now=NOW + timedelta(seconds=50))
    again = run(app(a="UNHEALTHY"), healthy.applications, now=NOW + timedelta(seconds=70))
    assert again.healthy
