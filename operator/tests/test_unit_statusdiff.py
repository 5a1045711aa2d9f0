from ray_operator.controllers.statusdiff import status_changed, without_timestamps


def test_timestamp_only_changes_are_not_changes():
    old = {
        "serviceStatus": "Running",
        "lastUpdateTime": "2024-01-01T00:00:00Z",
        "activeServiceStatus": {
            "dashboardStatus": {
                "isHealthy": True,
                "lastUpdateTime": "a",
                "healthLastUpdateTime": "a",
            },
            "applicationStatuses": {
                "app": {
                    "status": "RUNNING",
                    "lastUpdateTime": "a",
                    "serveDeploymentStatuses": {"d": {"status": "HEALTHY", "lastUpdateTime": "a"}},
                }
            },
        },
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "a"}],
    }
    new = without_timestamps(old) | {"lastUpdateTime": "2030-01-01T00:00:00Z"}
    new["conditions"] = [{"type": "Ready", "status": "True", "lastTransitionTime": "b"}]
    assert not status_changed(old, new)


def test_real_changes_are_changes():
    old = {
        "serviceStatus": "Running",
        "activeServiceStatus": {"dashboardStatus": {"isHealthy": True}},
    }
    assert status_changed(old, {**old, "serviceStatus": "Restarting"})
    assert status_changed(
        old, {**old, "activeServiceStatus": {"dashboardStatus": {"isHealthy": False}}}
    )
    assert status_changed({}, {"dashboardStatus": {"isHealthy": False}})


def test_absent_and_empty_are_the_same():
    assert not status_changed(None, {})
    assert not status_changed({"pendingServiceStatus": {}}, {})
    assert not status_changed({"state": ""}, {})
