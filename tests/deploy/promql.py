"""Which metric names a PromQL expression reads, and which names the service and its rules provide."""

from __future__ import annotations

import os
import re
from pathlib import Path

import yaml
from prometheus_client.metrics_core import Metric

from retrieval_server.observability.metrics import ServiceMetrics
from retrieval_server.observability.multiprocess import WorkerCollector

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "deploy" / "prometheus" / "rules.yml"

_WORDS = {
    # aggregations, functions and keywords used in our expressions
    "sum", "avg", "min", "max", "count", "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless",
    "offset", "rate", "irate", "increase", "changes", "resets", "histogram_quantile", "label_values", "bool", "topk", "bottomk",
    "time", "vector", "scalar", "abs", "clamp_min", "clamp_max", "delta", "deriv",
}
# Series Prometheus makes itself for every target.
BUILTIN = {"up", "scrape_duration_seconds", "scrape_samples_scraped"}


def metric_names(expr: str) -> set[str]:
    """Metric names in ``expr``: strings, label matchers, grouping clauses, ranges and numbers removed."""
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', expr)
    # Grafana's label_values(metric, label): the second argument is a label.
    text = re.sub(r"label_values\(\s*([^,]+),\s*\w+\s*\)", r"\1", text)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", r" \1 ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"\boffset\s+\w+", " ", text)
    text = re.sub(r"(?<![A-Za-z0-9_:])\d+(\.\d+)?([eE][+-]?\d+)?", " ", text)
    words = re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", text)
    return {w for w in words if w not in _WORDS}


def _sample_names(family: Metric) -> set[str]:
    suffixes = {"counter": ["_total", "_created"], "histogram": ["_bucket", "_count", "_sum", "_created"], "gauge": [""],
                "summary": ["_count", "_sum"], "info": ["_info"]}
    return {family.name + s for s in suffixes.get(family.type, [""])}


def exported_names() -> set[str]:
    """Every series name a worker's registry and the supervisor's endpoint can produce."""
    names: set[str] = set()
    workers = WorkerCollector()
    workers.pids[0], workers.alive[0] = os.getpid(), True
    metrics = ServiceMetrics()
    metrics.grpc  # registered by a server when it starts  # noqa: B018
    try:
        for family in [*metrics.registry.collect(), *workers.collect()]:
            names |= _sample_names(family)
    finally:
        metrics.close()
    return names


def recorded_names() -> set[str]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return {rule["record"] for g in groups for rule in g["rules"] if "record" in rule}


def rule_expressions() -> list[tuple[str, str]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [(rule.get("record") or rule["alert"], rule["expr"]) for g in groups for rule in g["rules"]]
