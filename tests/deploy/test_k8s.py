"""deploy/k8s: every manifest validates against the Kubernetes schemas (offline), and they fit together."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.deploy.promql import REPO
from tests.deploy.settings_names import AUTHENTICATION, known_variables, load_as_served

K8S = REPO / "deploy" / "k8s"
VERSION = "1.30.0"  # the oldest Kubernetes these manifests target (native gRPC probes are GA since 1.27)
# CRDs have no schema in kubernetes-validate; ServiceMonitor is checked by hand below.
CUSTOM_KINDS = {("monitoring.coreos.com/v1", "ServiceMonitor")}


def _resources() -> list[tuple[Path, dict[str, Any]]]:
    return [(path, doc) for path in sorted(K8S.glob("*.yaml")) for doc in yaml.safe_load_all(path.read_text()) if doc]


def _one(kind: str, name: str = "retrieval") -> dict[str, Any]:
    [doc] = [d for _, d in _resources() if d["kind"] == kind and d["metadata"]["name"] == name]
    return doc


def _built_in() -> list[tuple[Path, dict[str, Any]]]:
    return [(p, d) for p, d in _resources() if (d["apiVersion"], d["kind"]) not in CUSTOM_KINDS]


@pytest.mark.parametrize(("path", "doc"), _built_in(), ids=lambda v: v.name if isinstance(v, Path) else f"{v['kind']}/{v['metadata']['name']}")
def test_manifest_validates_against_the_kubernetes_schema(path: Path, doc: dict[str, Any]) -> None:
    kubernetes_validate.validate(doc, VERSION, strict=True)


def test_every_kind_is_validated_by_schema_or_by_hand() -> None:
    kinds = {d["kind"] for _, d in _resources()}
    assert kinds == {"ConfigMap", "Secret", "Deployment", "Service", "HorizontalPodAutoscaler", "PodDisruptionBudget", "ServiceMonitor"}
    assert {d["kind"] for _, d in _resources()} - {d["kind"] for _, d in _built_in()} == {"ServiceMonitor"}


def test_an_invalid_manifest_is_rejected() -> None:
    broken = _one("Deployment")
    broken["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["grpc"]["port"] = "health"  # grpc probes need a number
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, VERSION, strict=True)


def test_deployment_probes_grace_period_and_security() -> None:
    config = _one("ConfigMap")["data"]
    pod = _one("Deployment")["spec"]["template"]["spec"]
    # The Service is named retrieval: its links would set RETRIEVAL_PORT=tcp://... in the pod.
    assert pod["enableServiceLinks"] is False
    [container] = pod["containers"]
    health_port = int(config["RETRIEVAL_HEALTH_PORT"])
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert container[probe]["grpc"]["port"] == health_port, probe
    assert container["readinessProbe"]["grpc"]["service"] == "retrieval.v1.RetrievalService"
    # Termination waits for in-flight calls, then the event flush, with a little to spare.
    needed = float(config["RETRIEVAL_GRACE_PERIOD_S"]) + float(config["RETRIEVAL_EVENTS_PUBLISH_TIMEOUT_S"])
    assert needed <= pod["terminationGracePeriodSeconds"] <= needed + 10
    assert pod["securityContext"]["runAsNonRoot"] and pod["securityContext"]["runAsUser"] == 10001
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["resources"]["requests"]["cpu"] and container["resources"]["limits"]["memory"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["metrics"] == int(config["RETRIEVAL_METRICS_PORT"]) and ports["health"] == health_port
    # The TLS files the settings name are where the Secret is mounted.
    mount = next(m for m in container["volumeMounts"] if m["name"] == "tls")["mountPath"]
    assert config["RETRIEVAL_TLS_CERT"].startswith(mount + "/") and config["RETRIEVAL_TLS_KEY"].startswith(mount + "/")
    # An https Qdrant in the cluster has a private CA's certificate: that CA is mounted where the setting names it.
    assert config["RETRIEVAL_QDRANT_URL"].startswith("https://")
    ca_mount = next(m for m in container["volumeMounts"] if m["name"] == "qdrant-ca")
    assert ca_mount["readOnly"] and config["RETRIEVAL_QDRANT_CA"] == ca_mount["mountPath"] + "/ca.crt"
    [ca_volume] = [v for v in pod["volumes"] if v["name"] == "qdrant-ca"]
    assert ca_volume["secret"]["items"] == [{"key": "ca.crt", "path": "ca.crt"}]
    assert config["RETRIEVAL_AUTH_MODE"] == "jwt"


def test_configured_variables_are_real_settings() -> None:
    names = set(_one("ConfigMap")["data"]) | set(_one("Secret")["stringData"])
    retrieval = {n for n in names if n.startswith("RETRIEVAL_")}
    assert retrieval <= known_variables(), retrieval - known_variables()
    assert AUTHENTICATION <= retrieval
    assert {n for n in names if not n.startswith("RETRIEVAL_")} <= {
        "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_INSECURE", "OTEL_SERVICE_NAME", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG"}


def test_the_configured_settings_load_as_the_server_reads_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    container = _one("Deployment")["spec"]["template"]["spec"]["containers"][0]
    env = {**_one("ConfigMap")["data"], **_one("Secret")["stringData"], **{e["name"]: e["value"] for e in container.get("env", []) if "value" in e}}
    settings = load_as_served({k: v for k, v in env.items() if k.startswith("RETRIEVAL_")}, tmp_path, monkeypatch)
    assert settings.auth_mode == "jwt" and settings.processes == int(env["RETRIEVAL_PROCESSES"])


def test_selectors_agree() -> None:
    labels = _one("Deployment")["spec"]["template"]["metadata"]["labels"]
    assert _one("Deployment")["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert _one("Service")["spec"]["selector"].items() <= labels.items()
    assert _one("PodDisruptionBudget")["spec"]["selector"]["matchLabels"].items() <= labels.items()
    hpa = _one("HorizontalPodAutoscaler")["spec"]
    assert hpa["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "retrieval"}
    assert _one("PodDisruptionBudget")["spec"]["minAvailable"] < hpa["minReplicas"]
    # The autoscaler owns the count: a Deployment's own would be applied over it on every rollout.
    assert "replicas" not in _one("Deployment")["spec"]


def test_service_monitor_scrapes_the_metrics_port() -> None:
    monitor = _one("ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    selected = [d for _, d in _resources() if d["kind"] == "Service"
                and monitor["spec"]["selector"]["matchLabels"].items() <= d["metadata"]["labels"].items()]
    [endpoint] = monitor["spec"]["endpoints"]
    scraped = [s for s in selected if endpoint["port"] in {p["name"] for p in s["spec"]["ports"]}]
    assert len(scraped) == 1, "exactly one Service exposes the metrics port to the monitor"
    assert endpoint["path"] == "/metrics"


def test_what_the_service_writes_under_the_read_only_root_is_mounted() -> None:
    """The data folder, numba's cache, the user cache folder (model digests, onnxruntime's files,
    which it otherwise warned of in plain text amid the JSON log lines) and /tmp."""
    dockerfile = (REPO / "Dockerfile").read_text()
    env = dict(re.findall(r"(RETRIEVAL_DATA_DIR|NUMBA_CACHE_DIR)=(\S+)", dockerfile))
    user = re.search(r"useradd --create-home .*?(\S+)$", dockerfile, re.M).group(1)  # type: ignore[union-attr]
    home = f"/home/{user}"  # where useradd makes it: Path.home(), whose .cache the service writes
    [container] = _one("Deployment")["spec"]["template"]["spec"]["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    mounted = {m["mountPath"] for m in container["volumeMounts"] if not m.get("readOnly")}
    assert {env["RETRIEVAL_DATA_DIR"], env["NUMBA_CACHE_DIR"], f"{home}/.cache", "/tmp"} <= mounted


def test_no_mount_hides_the_model_cache_the_image_built() -> None:
    """The image builds the fp32 graph into the model cache once; an emptyDir over ~/.cache, where
    it was, hid it, and every pod built it again (2 s, ~650 MB at its peak)."""
    dockerfile = (REPO / "Dockerfile").read_text()
    user = re.search(r"useradd --create-home .*?(\S+)$", dockerfile, re.M).group(1)  # type: ignore[union-attr]
    found = re.search(r"RETRIEVAL_MODEL_CACHE_DIR=(\S+)", dockerfile)
    cache = found.group(1) if found else f"/home/{user}/.cache/retrieval-server"  # the default: the user cache folder's
    [container] = _one("Deployment")["spec"]["template"]["spec"]["containers"]
    hiding = [m["mountPath"] for m in container["volumeMounts"] if cache == m["mountPath"] or cache.startswith(m["mountPath"].rstrip("/") + "/")]
    assert not hiding, f"{hiding} hides the model cache {cache}"
    assert re.search(r"^RUN .*fp32_model\(.*RETRIEVAL_MODEL_CACHE_DIR", dockerfile, re.M), "the graph is built where the server looks"
    config = _one("ConfigMap").get("data", {})
    assert "RETRIEVAL_MODEL_CACHE_DIR" not in config and all(e["name"] != "RETRIEVAL_MODEL_CACHE_DIR" for e in container.get("env", []))
