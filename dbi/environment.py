"""Every environment variable dbi's processes read: its default, what it means, who reads it.

The worker, the watcher and the operator commands read their settings only through
this table, the one list docs/configuration.md (``python -m dbi.environment`` rewrites
its table), deploy/ and docker-compose.yml are checked against (tests/test_deploy.py,
tests/test_docker_compose.py, tests/dbi/test_environment.py). A malformed value is an
error that names the variable.
"""

from __future__ import annotations

import sys
from pathlib import Path

from dbi import markdown
from dbi.variable import CLI, WATCHER, WORKER, Process, Variable
from dbi.variable import var as _var

TEMPORAL_ADDRESS = _var(
    "TEMPORAL_ADDRESS", "127.0.0.1:7233", "Temporal frontend, host:port.", WORKER, WATCHER, CLI
)
TEMPORAL_NAMESPACE = _var(
    "TEMPORAL_NAMESPACE", "default", "Temporal namespace of the workflows.", WORKER, WATCHER, CLI
)
TEMPORAL_PROFILE = _var(
    "TEMPORAL_PROFILE",
    None,
    "Profile of the Temporal client configuration file (TEMPORAL_CONFIG_FILE, else "
    "~/.config/temporalio/temporal.toml) to connect with: address, namespace, TLS, mTLS, API "
    "key. Unset: the file's default profile, if any. TEMPORAL_* variables override it "
    "(docs/configuration.md).",
    WORKER,
    WATCHER,
    CLI,
)
KUBECONFIG = _var(
    "KUBECONFIG",
    None,
    "Kubeconfig file; unset: the pod's service account (in-cluster).",
    WORKER,
    WATCHER,
    CLI,
)
TASK_QUEUE = _var(
    "DBI_TASK_QUEUE",
    "dbi",
    "Task queue the worker polls and the watcher starts workflows on (`dbi temporal "
    "setup` reports its pollers).",
    WORKER,
    WATCHER,
    CLI,
)
IMAGES = _var(
    "DBI_IMAGES",
    None,
    "JSON object of PostgreSQL major version to VirtualMachineImage `namespace/name`; "
    "unset: `dbi-images/postgres-<version>`. An instance without `spec.image` boots its "
    "version's; changing it repaves those instances.",
    WORKER,
)
EXTENSIONS = _var(
    "DBI_EXTENSIONS",
    None,
    "Comma-separated extensions a DBDatabase's `spec.extensions` may name (default: "
    "contrib extensions that run no tenant code as superuser, `dbi.databases."
    "DEFAULT_EXTENSIONS`); any other is refused (`FieldRefused`).",
    WORKER,
)
GRANTABLE_ROLES = _var(
    "DBI_GRANTABLE_ROLES",
    None,
    "Comma-separated predefined roles a DBRole's `spec.inRoles` may name (default: those "
    "that neither read nor write the server's files nor run programs, `dbi.roles."
    "DEFAULT_GRANTABLE`); any other is refused (`FieldRefused`).",
    WORKER,
)
IMAGE_NAMESPACES = _var(
    "DBI_IMAGE_NAMESPACES",
    None,
    "Comma-separated namespaces whose VirtualMachineImages `spec.image` may name, besides "
    "those `DBI_IMAGES` names; an image elsewhere (another tenant's namespace, say) is "
    "refused (`ImageNotAllowed`).",
    WORKER,
)
NAMESPACE = _var(
    "DBI_NAMESPACE",
    "dbi-system",
    "The orchestrator's own namespace: it keeps each instance's admin credential there, "
    "out of tenants' reach (deploy/ sets it to the pod's namespace).",
    WORKER,
)
ADMIN_ROTATION_INTERVAL = _var(
    "DBI_ADMIN_ROTATION_INTERVAL",
    "720h",
    "How often each instance's admin password is rotated, as a duration (`720h`: 30 days);"
    " `0` turns scheduled rotation off.",
    WORKER,
)
TLS_CERT_LIFETIME = _var(
    "DBI_TLS_CERT_LIFETIME",
    "2160h",
    "How long each instance's TLS server certificate is valid, as a duration (`2160h`: 90 "
    "days, at least `30s`); it is renewed once a third of it is left.",
    WORKER,
)
CONNECT_HOSTADDR = _var(
    "DBI_CONNECT_HOSTADDR",
    None,
    "`1`: the credentials Secret's `uri` also carries `hostaddr=<the Service's ClusterIP>` "
    "(and a `hostaddr` key), for clients that cannot resolve cluster DNS, such as the local "
    "stack's host (`./dev up` sets it). Unset in clusters: clients resolve `host`.",
    WORKER,
)
BACKUP_STORE = _var(
    "DBI_BACKUP_STORE",
    None,
    "Where backups go: `s3://<bucket>[/<prefix>]` (an S3-compatible store: "
    "`DBI_BACKUP_S3_ENDPOINT`, `AWS_*`) or `file:///<absolute directory>` (a PVC mounted "
    "in the worker; the local stack's default). Unset: instances with `spec.backup` are "
    "Stalled (`NoBackupStore`) and `dbi backup` fails.",
    WORKER,
)
BACKUP_S3_ENDPOINT = _var(
    "DBI_BACKUP_S3_ENDPOINT",
    None,
    "Base URL of the S3-compatible endpoint, such as `https://minio.example:9000` (`http://` "
    "only on a trusted network); unset: AWS S3 (`https://s3.amazonaws.com`).",
    WORKER,
)
BACKUP_ALLOWED_NETWORKS = _var(
    "DBI_BACKUP_ALLOWED_NETWORKS",
    None,
    "Comma-separated networks (CIDRs, such as `10.43.0.0/16`) that a tenant's backup "
    "endpoint (`spec.backup.target.s3.endpoint`) may reach although they are private, "
    "loopback, link-local or otherwise not public: an in-cluster object store's, say. "
    "Unset: the worker connects to a tenant's endpoint only at a public address "
    "(docs/security.md).",
    WORKER,
)
AWS_ACCESS_KEY_ID = _var(
    "AWS_ACCESS_KEY_ID", None, "Access key of the S3 backup store (from a Secret).", WORKER
)
AWS_SECRET_ACCESS_KEY = _var(
    "AWS_SECRET_ACCESS_KEY", None, "Secret key of the S3 backup store (from a Secret).", WORKER
)
AWS_REGION = _var("AWS_REGION", "us-east-1", "Region of the S3 backup store's bucket.", WORKER)
AWS_WEB_IDENTITY_TOKEN_FILE = _var(
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    None,
    "Without AWS_ACCESS_KEY_ID: a web identity token (IRSA writes it and AWS_ROLE_ARN) that "
    "the worker exchanges at STS for the S3 backup store's credentials.",
    WORKER,
)
AWS_ROLE_ARN = _var(
    "AWS_ROLE_ARN", None, "The role the web identity assumes for the S3 backup store.", WORKER
)
AWS_ENDPOINT_URL_STS = _var(
    "AWS_ENDPOINT_URL_STS",
    None,
    "STS for the web identity (an S3-compatible store's, such as MinIO's); unset: AWS's, "
    "in AWS_REGION.",
    WORKER,
)
AWS_CONTAINER_CREDENTIALS_FULL_URI = _var(
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    None,
    "Without keys or a web identity: a container credentials endpoint (EKS Pod Identity; "
    "with AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE) for the S3 backup store.",
    WORKER,
)
AWS_CONTAINER_CREDENTIALS_RELATIVE_URI = _var(
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    None,
    "The same, on ECS's credentials endpoint.",
    WORKER,
)
BACKUP_MAX_RATE = _var(
    "DBI_BACKUP_MAX_RATE",
    None,
    "Cap on how fast a backup reads the instance's data directory (pg_basebackup's "
    "`--max-rate`: a number of kB/s, or with `k` or `M`, from `32k` to `1024M`), so a "
    "backup leaves the database I/O for its clients; unset: no cap.",
    WORKER,
)
PG_BIN_DIR = _var(
    "DBI_PG_BIN_DIR",
    None,
    "Directory holding `pg_basebackup` (PostgreSQL 18's, which backs up 16 to 18); unset: "
    "found on PATH. The local stack sets it to its PostgreSQL build.",
    WORKER,
)
BACKUP_SCRATCH_LIMIT = _var(
    "DBI_BACKUP_SCRATCH_LIMIT",
    "16Gi",
    "How much one backup may stage in the worker's scratch directory (its compressed "
    "tarballs, a Kubernetes quantity, at least `1Mi`) before it goes to the store; a "
    "backup that needs more fails (`BackupScratchFull`) instead of filling the worker's "
    "disk. Size the worker's scratch volume for `DBI_LONG_ACTIVITIES` of them (deploy/ "
    "gives `/tmp` 34Gi for 2).",
    WORKER,
)
LONG_ACTIVITIES = _var(
    "DBI_LONG_ACTIVITIES",
    "2",
    "How many long activities (a backup, a phase of a major upgrade) one worker runs at "
    "once, on the task queue `<DBI_TASK_QUEUE>-long` in threads of their own, apart from "
    "the steps' 32: more wait on that queue, and no number of them holds up a step. Each "
    "backup stages up to `DBI_BACKUP_SCRATCH_LIMIT` in the worker's scratch directory.",
    WORKER,
)
EXPORTER_PORT = _var(
    "DBI_EXPORTER_PORT", "9187", "Port of the PostgreSQL exporter inside the VM.", WORKER
)
WATCH_NAMESPACES = _var(
    "DBI_WATCH_NAMESPACES",
    None,
    "Comma-separated namespaces to list and watch, each on its own (RoleBindings there "
    "suffice: deploy/namespaced); unset: every namespace, cluster-wide. The worker "
    "watches them too: an idle pass reads from those watches (docs/idle.md).",
    WORKER,
    WATCHER,
)
WATCH_SECONDS = _var(
    "DBI_WATCH_SECONDS",
    "240",
    "How long one watch request lasts before it is resumed, s.",
    WATCHER,
)
LEASE_NAMESPACE = _var(
    "DBI_LEASE_NAMESPACE",
    None,
    "Namespace of the Lease `dbi-watcher` replicas elect a leader on; unset: no election.",
    WATCHER,
)
LEASE_SECONDS = _var("DBI_LEASE_SECONDS", "15", "Leader lease duration, s.", WATCHER)
SHUTDOWN_SECONDS = _var(
    "DBI_SHUTDOWN_SECONDS",
    "45",
    "How long a stopping worker lets running activities finish before it cancels them, s; "
    "keep it below the pod's terminationGracePeriodSeconds (60 in deploy/).",
    WORKER,
)
CACHED_WORKFLOWS = _var(
    "DBI_CACHED_WORKFLOWS",
    "1000",
    "How many instances' workflows the worker keeps in memory between passes (the SDK's "
    "sticky cache); one evicted replays its history at its next pass. A settled Ready "
    "instance's workflow passes once every six hours (the worker re-checks it in between, "
    "cached or not), so the cache may be smaller than the fleet: docs/deploy.md says how to "
    "size it.",
    WORKER,
)
STICKY_SECONDS = _var(
    "DBI_STICKY_SECONDS",
    "60",
    "How long a pass's workflow task waits for the worker that holds its workflow in "
    "memory before any worker may take it, replaying its history first, s. Shorter moves "
    "a crashed worker's instances on sooner; too short, a busy worker's late tasks are "
    "replayed elsewhere, which makes it busier (docs/benchmarks.md).",
    WORKER,
)
POD_NAME = _var(
    "POD_NAME", None, "Identity in the leader election; unset: host name and pid.", WATCHER
)
METRICS_PORT = _var(
    "DBI_METRICS_PORT",
    None,
    "Port of the Prometheus /metrics endpoint and the /livez and /readyz probes; unset: none.",
    WORKER,
    WATCHER,
)
LOG_FORMAT = _var(
    "DBI_LOG_FORMAT", "json", "`json` (one object per line) or `text`.", WORKER, WATCHER
)
TEMPORAL_UI = _var(
    "DBI_TEMPORAL_UI",
    "http://127.0.0.1:8233",
    "Temporal Web UI base URL, for the links `dbi describe` prints.",
    CLI,
)
TRACES_EXPORTER = _var(
    "OTEL_TRACES_EXPORTER",
    None,
    "`otlp`, `console` or `none`; unset: `otlp` when an OTLP endpoint is set, else `none`.",
    WORKER,
    WATCHER,
)
OTLP_ENDPOINT = _var(
    "OTEL_EXPORTER_OTLP_ENDPOINT", None, "OTLP collector base URL.", WORKER, WATCHER
)
OTLP_TRACES_ENDPOINT = _var(
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", None, "OTLP traces URL.", WORKER, WATCHER
)
OTLP_PROTOCOL = _var(
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "http/protobuf",
    "OTLP's transport: `http/protobuf` or `grpc`.",
    WORKER,
    WATCHER,
)
OTLP_TRACES_PROTOCOL = _var(
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", None, "The same, for traces alone.", WORKER, WATCHER
)
SERVICE_NAME = _var(
    "OTEL_SERVICE_NAME",
    None,
    "Service name on spans; unset: `dbi-worker` or `dbi-watcher`.",
    WORKER,
    WATCHER,
)

ALL: tuple[Variable, ...] = tuple(v for v in globals().values() if isinstance(v, Variable))


def read_by(process: Process) -> set[str]:
    """The names of the variables ``process`` reads."""
    return {v.name for v in ALL if process in v.read_by}


START, END = "<!-- environment:start -->", "<!-- environment:end -->"


def table() -> str:
    """The Markdown table of every variable."""
    lines = ["| variable | default | read by | meaning |", "|---|---|---|---|"]
    for v in ALL:
        default = f"`{v.default}`" if v.default is not None else "unset"
        readers = ", ".join(p.value for p in Process if p in v.read_by)
        lines.append(f"| `{v.name}` | {default} | {readers} | {v.meaning} |")
    return "\n".join(lines)


def replace_in(text: str) -> str:
    """Return ``text`` with the table between the markers replaced by the current one."""
    return markdown.replace_between(text, START, END, table())


if __name__ == "__main__":
    path = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/configuration.md")
    path.write_text(replace_in(path.read_text()))
    print(f"wrote the environment table in {path}")
