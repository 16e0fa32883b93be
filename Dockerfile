# The demo agent as a container (the `demo` service of docker-compose.yml): installs this package and
# runs `otel-toolcall-eval demo` as a steady load generator that exports spans and metrics over OTLP.
# Standalone: docker build -t otel-toolcall-eval-demo:0.1.0 . && docker run --rm otel-toolcall-eval-demo:0.1.0 demo
FROM python:3.12.13-slim-trixie

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install . \
    && useradd --system --uid 10001 --no-create-home demo

USER 10001
ENTRYPOINT ["otel-toolcall-eval"]
CMD ["demo", "--otlp-endpoint", "http://collector:4317", "--traces-per-second", "2", "--duration", "86400"]
