# The dbi image: `dbi worker` and `dbi watcher` (deploy/, docker-compose.yml).
#   docker build -t dbi:0.1.0 .
# Not built here (the development machine has no Docker engine); tests/test_deploy.py
# checks that what deploy/ and docker-compose.yml run is what this image provides.
FROM python:3.12-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /src
COPY pyproject.toml README.md ./
# Production code only: devstack/ and bench/ are dev-only, and nothing here imports them.
COPY dbi dbi
COPY activities activities
COPY workflows workflows
COPY watcher watcher
COPY commands commands
RUN pip install --no-cache-dir . && rm -rf /src
WORKDIR /
USER 10001:10001
ENTRYPOINT ["dbi"]
CMD ["--help"]
