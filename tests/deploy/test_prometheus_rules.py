"""deploy/prometheus: promtool accepts the rules, their unit tests pass, and they read real metrics."""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.deploy.promql import BUILTIN, RULES, exported_names, metric_names, recorded_names, rule_expressions
from tests.support.paths import require_binary


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    binary = require_binary("prometheus", "/usr/bin/promtool")
    return subprocess.run([binary, *args], cwd=RULES.parent, capture_output=True, text=True, timeout=120)


def test_promtool_checks_the_rules() -> None:
    result = _promtool("check", "rules", RULES.name)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_promtool_rule_unit_tests_pass() -> None:
    result = _promtool("test", "rules", "rules.test.yml")
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_unit_tests_fail_when_an_alert_is_broken(tmp_path: pytest.TempPathFactory) -> None:
    """The unit tests can fail: with the error threshold raised out of reach, the error-ratio test does."""
    broken = RULES.read_text().replace("job_grpc_method:grpc_server_errors:ratio_rate5m > 0.05", "job_grpc_method:grpc_server_errors:ratio_rate5m > 0.5")
    assert broken != RULES.read_text()
    (tmp_path / "rules.yml").write_text(broken)  # type: ignore[operator]
    (tmp_path / "rules.test.yml").write_text((RULES.parent / "rules.test.yml").read_text())  # type: ignore[operator]
    binary = require_binary("prometheus", "/usr/bin/promtool")
    result = subprocess.run([binary, "test", "rules", "rules.test.yml"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0 and "RetrievalHighErrorRatio" in result.stdout + result.stderr


def test_every_rule_reads_metrics_the_service_exports() -> None:
    known = exported_names() | recorded_names() | BUILTIN
    for name, expr in rule_expressions():
        assert metric_names(expr), name
        assert metric_names(expr) <= known, f"{name} reads unknown metrics {metric_names(expr) - known}"


def test_metric_name_extraction() -> None:
    expr = 'sum by (job, le) (rate(grpc_server_handling_seconds_bucket{grpc_method="Query",x=~"a|b"}[5m])) / on (job) group_left up offset 1h > 0.5'
    assert metric_names(expr) == {"grpc_server_handling_seconds_bucket", "up"}


def _readme_alert_rows() -> dict[str, str]:
    readme = (RULES.parents[2] / "README.md").read_text()
    rows = [line for line in readme.splitlines() if line.startswith("| `Retrieval")]
    return {re.match(r"\| `(\w+)`", row).group(1): row for row in rows}  # type: ignore[union-attr]


def test_readme_alert_table_lists_every_alert() -> None:
    assert set(_readme_alert_rows()) == {name for name, _ in rule_expressions()} - recorded_names()


def test_readme_names_every_kind_an_alert_excludes() -> None:
    """An exclusion added to a rule but not to its README row would make the table promise pages that never come."""
    rows = _readme_alert_rows()
    for name, expr in rule_expressions():
        for excluded in re.findall(r'kind!~"([^"]+)"', expr):
            for kind in excluded.split("|"):
                written = kind.replace(".*", "*")
                assert f"`{written}`" in rows[name], f"README's {name} row does not name the excluded {written!r}"
