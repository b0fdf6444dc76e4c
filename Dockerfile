# syntax=docker/dockerfile:1
# Build stage: a wheel of the service (stubs, client and resources included).
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY protos ./protos
COPY clients ./clients
COPY retrieval_server ./retrieval_server
COPY scoring_core ./scoring_core
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

# Runtime stage: the wheel and its dependencies, run as an unprivileged user.
FROM python:3.11-slim
RUN useradd --create-home --uid 10001 retrieval
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
USER retrieval
WORKDIR /home/retrieval
ENV RETRIEVAL_DATA_DIR=/home/retrieval/data \
    RETRIEVAL_HOST=0.0.0.0 \
    RETRIEVAL_PORT=50051 \
    NUMBA_CACHE_DIR=/home/retrieval/.numba
VOLUME ["/home/retrieval/data"]
EXPOSE 50051 9464
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
  CMD ["retrieval-server", "health", "--server", "localhost:50051"]
ENTRYPOINT ["retrieval-server"]
CMD ["serve"]
