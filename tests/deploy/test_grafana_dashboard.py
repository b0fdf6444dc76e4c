"""deploy/grafana: the dashboard is well-formed and every panel queries metrics that exist."""

from __future__ import annotations

import json

import yaml

from tests.deploy.promql import BUILTIN, REPO, exported_names, metric_names, recorded_names

DASHBOARD = REPO / "deploy" / "grafana" / "dashboards" / "retrieval.json"


def test_dashboard_structure() -> None:
    dash = json.loads(DASHBOARD.read_text())
    assert dash["uid"] and dash["title"] and isinstance(dash["schemaVersion"], int)
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)) and len(ids) >= 8
    for panel in dash["panels"]:
        assert panel["type"] in {"timeseries", "stat", "gauge", "bargauge", "table"}
        assert panel["title"] and panel["datasource"]["uid"] == "${datasource}"
        grid = panel["gridPos"]
        assert 0 <= grid["x"] and grid["x"] + grid["w"] <= 24 and grid["h"] > 0
        refs = [t["refId"] for t in panel["targets"]]
        assert refs and len(refs) == len(set(refs))
        assert all(t["expr"].strip() for t in panel["targets"])


def test_every_panel_queries_metrics_that_exist() -> None:
    dash = json.loads(DASHBOARD.read_text())
    known = exported_names() | recorded_names() | BUILTIN
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    exprs += [v["definition"] for v in dash["templating"]["list"] if v["type"] == "query"]
    for expr in exprs:
        names = metric_names(expr.replace("$job", "x"))
        assert names, expr
        assert names <= known, f"{expr} reads unknown metrics {names - known}"


def test_every_recording_rule_and_alert_family_is_on_the_dashboard() -> None:
    panels = json.dumps(json.loads(DASHBOARD.read_text())["panels"])
    for record in recorded_names():
        assert record in panels, f"recording rule {record} has no panel"


def test_provisioning_points_at_the_dashboards() -> None:
    provider = yaml.safe_load((REPO / "deploy" / "grafana" / "provisioning" / "dashboards" / "retrieval.yml").read_text())
    assert provider["providers"][0]["options"]["path"] == "/var/lib/grafana/dashboards"
    source = yaml.safe_load((REPO / "deploy" / "grafana" / "provisioning" / "datasources" / "prometheus.yml").read_text())
    assert source["datasources"][0]["type"] == "prometheus"
