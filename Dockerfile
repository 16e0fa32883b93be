# The package as a container: by default the demo agent (the `demo` service of docker-compose.yml), a steady
# load generator that exports spans and metrics over OTLP; with `serve` the scoring service (the `scorer`
# service: OTLP in on 4317/4318, scored spans out, Prometheus metrics on 9464 when configured; docs/serve.md).
# Standalone: docker build -t otel-toolcall-eval-demo:0.1.0 . && docker run --rm otel-toolcall-eval-demo:0.1.0 demo
#   docker run --rm -p 4317:4317 -p 4318:4318 otel-toolcall-eval-demo:0.1.0 serve --host 0.0.0.0 \
#     --export-endpoint http://collector:4317
FROM python:3.12.13-slim-trixie

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install '.[serve,judge,redis,prometheus]' \
    && useradd --system --uid 10001 --no-create-home demo

USER 10001
EXPOSE 4317 4318 9464
ENTRYPOINT ["otel-toolcall-eval"]
CMD ["demo", "--otlp-endpoint", "http://collector:4317", "--traces-per-second", "2", "--duration", "86400"]
