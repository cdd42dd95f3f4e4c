"""One test per user journey, each from `kubectl apply -f deploy/samples/dbinstance.yaml`,
with the real kubectl, temporal CLI, dbi CLI and psycopg (docs/user-guide.md)."""

from __future__ import annotations

import base64
import json
import os

import psycopg
import pytest

from dbi import names
from devstack import postgresql
from tests import dbi_command
from tests.journeys.product import NAME, Product, metrics, patch, reading, rows, sql

pytestmark = pytest.mark.stack


def create(product: Product, journey: str) -> str:
    """Apply the sample in the journey's namespace, wait for Ready, write two rows."""
    namespace = product.namespaces[journey]
    product.kubectl("apply", "-n", namespace, "-f", str(product.sample))
    product.wait(namespace, "condition=Ready")
    sql(product.uri(namespace), "CREATE TABLE orders (id int PRIMARY KEY, item text)")
    sql(product.uri(namespace), "INSERT INTO orders VALUES (1, 'tea'), (2, 'milk')")
    return namespace


def test_create_connect_and_find_it_in_temporal(product: Product) -> None:
    """Ready, the Secret connects and takes rows; the Temporal CLI shows the workflow's
    steps and finds it by phase."""
    namespace = create(product, "create")
    db = product.get(namespace)
    assert db["status"]["phase"] == "Running"
    assert rows(product, namespace) == 2
    assert sql(product.uri(namespace), "SELECT current_user, current_database()") == (
        "orders",
        "orders",
    )
    # `dbi psql`: the app role over verified TLS, the password never on its command line.
    client = f"{postgresql.bin_dir()}:{os.environ['PATH']}"
    query = "SELECT current_user, ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"
    psql = dbi_command.dbi(
        product.local_stack, "psql", NAME, "-n", namespace, "--", "-tAc", query, PATH=client
    )
    assert (psql.returncode, psql.stdout.strip()) == (0, "orders|t"), psql.stderr
    # `dbi logs`: the worker's lines about it, read from its pod's log through the API
    # server (devstack/kubelet.py serves the processes' logs as pods'), in time order.
    logged = dbi_command.dbi(product.local_stack, "logs", NAME, "-n", namespace, "-o", "json")
    assert logged.returncode == 0, logged.stderr
    lines = json.loads(logged.stdout)["items"]
    acted = {line["step"] for line in lines if line["message"].startswith(f"{line['step']} acted")}
    assert {"credentials", "vm"} <= acted, lines
    assert {line["pod"].rsplit("-", 1)[0] for line in lines} == {"dbi-worker"}
    assert [line["time"] for line in lines] == sorted(line["time"] for line in lines)
    printed = dbi_command.dbi(product.local_stack, "logs", NAME, "-n", namespace).stdout
    assert printed.split("\n", 1)[0].split() == ["TIME", "POD", "LEVEL", "STEP", "MESSAGE"]
    assert len(printed.splitlines()) == len(lines) + 1
    assert "(VMCreated): The VirtualMachine was created.\n" in printed  # no SDK context
    elsewhere = dbi_command.dbi(product.local_stack, "logs", NAME, "-n", "default")
    assert (elsewhere.returncode, elsewhere.stdout.strip()) == (
        0,
        f"no lines about default/{NAME} in the logs of 2 pods",
    )

    workflow_id = names.workflow_id(namespace, NAME)
    described = json.loads(
        product.temporal("workflow", "describe", "-w", workflow_id, "-o", "json")
    )
    assert described["workflowExecutionInfo"]["status"] == "WORKFLOW_EXECUTION_STATUS_RUNNING"
    shown = product.temporal("workflow", "describe", "-w", workflow_id)
    assert "DbiPhase" in shown and "Running" in shown, shown
    # The current details (the CLI shows them with `metadata`): the last pass's table of
    # steps, each Satisfied.
    details = product.temporal("workflow", "metadata", "-w", workflow_id)
    for step in ("preflight", "credentials", "vm", "power", "resize", "health", "access"):
        assert f"| {step} |" in details, details
    assert "Satisfied" in details and "not reached" not in details, details
    # Each activity, and each local activity's marker, has a summary the UI and the CLI
    # show.
    history = json.loads(product.temporal("workflow", "show", "-w", workflow_id, "-o", "json"))
    summaries = {
        json.loads(base64.b64decode(e["userMetadata"]["summary"]["data"]))
        for e in history["events"]
        if e["eventType"] in {"EVENT_TYPE_ACTIVITY_TASK_SCHEDULED", "EVENT_TYPE_MARKER_RECORDED"}
        and "userMetadata" in e
    }
    steps_summary = "the steps, one after the other, then the status, while Satisfied"
    assert {"load the DBInstance", steps_summary} <= summaries
    # The steps' marker holds each step's result: the CLI and the UI show them.
    ran = {
        result["step"]: result["outcome"]
        for e in history["events"]
        if e["eventType"] == "EVENT_TYPE_MARKER_RECORDED"
        for payload in e["markerRecordedEventAttributes"]["details"]
        .get("result", {})
        .get("payloads", [])
        if "data" in payload  # an empty result (the status write's) has none
        and isinstance(found := json.loads(base64.b64decode(payload["data"])), dict)
        for result in found.get("results", [])
    }
    assert ran.get("vm") == "Satisfied", ran
    # The workflow's own status writes never woke it (watcher/relevance.py).
    wakes = [
        json.loads(
            base64.b64decode(
                e["workflowExecutionSignaledEventAttributes"]["input"]["payloads"][0]["data"]
            )
        )
        for e in history["events"]
        if e["eventType"] == "EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED"
    ]
    assert wakes and not [w for w in wakes if w["reason"] == f"DBInstance {NAME} modified"]

    query = f"DbiPhase='Running' AND DbiNamespace='{namespace}'"
    listed = json.loads(product.temporal("workflow", "list", "--query", query, "-o", "json"))
    assert [w["execution"]["workflowId"] for w in listed] == [workflow_id]


def test_stop_is_unreachable_and_start_keeps_the_rows(product: Product) -> None:
    """Stopped: neither the server nor its exporter answers. Started: the rows are
    there, and the exporter, through the metrics Service, reads the server again."""
    namespace = create(product, "power")
    before = product.uri(namespace)
    scraped = product.until(
        lambda: reading(product, namespace), what="the exporter's pg_up 1 through the Service"
    )
    assert f'pg_database_size_bytes{{datname="{NAME}"}}' in scraped

    patch(product, namespace, {"powerState": "Stopped"})
    product.wait(namespace, "jsonpath={.status.phase}=Stopped")
    with pytest.raises(psycopg.OperationalError):
        sql(before, "SELECT 1")
    with pytest.raises(OSError):  # the Service has no running VM behind it
        metrics(product, namespace)

    patch(product, namespace, {"powerState": "Running"})
    db = product.converged(namespace)
    assert db["status"]["phase"] == "Running"
    assert rows(product, namespace) == 2
    assert product.uri(namespace) == before
    product.until(lambda: reading(product, namespace), what="pg_up 1 again after the start")


def test_resize_cpu_memory_with_a_restart_and_grow_storage(product: Product) -> None:
    """CPU past what the VM can hot-plug (the sample's 2 allow 8) restarts it under the
    default resizePolicy Restart; memory and storage grow; the rows stay."""
    namespace = create(product, "resize")
    vmi_before = product.get(namespace, "virtualmachineinstances.kubevirt.io")["metadata"]["uid"]

    patch(product, namespace, {"resources": {"cpu": 10, "memory": "4Gi", "storage": "20Gi"}})
    db = product.converged(namespace)
    observed = db["status"]["observed"]
    assert (observed["cpu"], observed["memory"], observed["storage"]) == (10, "4Gi", "20Gi")
    vmi = product.get(namespace, "virtualmachineinstances.kubevirt.io")
    assert vmi["metadata"]["uid"] != vmi_before, "the VM was not restarted"
    assert vmi["spec"]["domain"]["cpu"]["sockets"] == 10
    disk = product.get(namespace, "persistentvolumeclaim", f"{NAME}-data")
    assert disk["spec"]["resources"]["requests"]["storage"] == "20Gi"
    assert rows(product, namespace) == 2

    # Under resizePolicy Deferred a restart waits for the operator: `dbi resize --force`.
    patch(product, namespace, {"resizePolicy": "Deferred", "resources": {"cpu": 48}})
    product.wait(
        namespace,
        'jsonpath={.status.conditions[?(@.type=="SizeSynced")].reason}=RestartRequired',
    )
    forced = product.dbi("resize", NAME, "-n", namespace, "--force")
    assert forced.returncode == 0, (forced.stdout, forced.stderr)
    assert "resized" in forced.stdout
    assert product.converged(namespace)["status"]["observed"]["cpu"] == 48
    assert rows(product, namespace) == 2


def test_rotate_by_deleting_the_secret_and_with_dbi_rotate(product: Product) -> None:
    namespace = create(product, "rotate")
    first = product.uri(namespace)
    secret = product.get(namespace)["status"]["credentialsSecretName"]

    product.kubectl("delete", "secret", secret, "-n", namespace)
    second = product.until(
        lambda: (uri := _uri_or_none(product, namespace)) not in (None, first) and uri,
        what="a new credentials Secret",
    )
    product.wait(namespace, "condition=Ready")
    assert rows(product, namespace) == 2
    with pytest.raises(psycopg.OperationalError):
        sql(first, "SELECT 1")

    rotated = product.dbi("rotate", NAME, "-n", namespace)
    assert rotated.returncode == 0, rotated.stderr
    third = product.uri(namespace)
    assert third != second
    assert _password(second) not in rotated.stdout + rotated.stderr
    assert _password(third) not in rotated.stdout + rotated.stderr
    assert rows(product, namespace) == 2
    with pytest.raises(psycopg.OperationalError):
        sql(second, "SELECT 1")


def test_delete_removes_every_child_and_completes_the_workflow(product: Product) -> None:
    namespace = create(product, "delete")
    workflow_id = names.workflow_id(namespace, NAME)

    product.kubectl("delete", "dbinstance", NAME, "-n", namespace, "--timeout=180s")
    selector = f"{names.INSTANCE_LABEL}={NAME}"
    kinds = ",".join(
        (
            "secrets",
            "persistentvolumeclaims",
            "services",
            "virtualmachines.kubevirt.io",
            "virtualmachineinstances.kubevirt.io",
        )
    )

    def children() -> list[str]:
        out = product.kubectl("get", kinds, "-n", namespace, "-l", selector, "-o", "name").stdout
        return out.split()

    product.until(lambda: children() == [], what="every child deleted", timeout=60)

    def status() -> str:
        out = product.temporal("workflow", "describe", "-w", workflow_id, "-o", "json")
        return str(json.loads(out)["workflowExecutionInfo"]["status"])

    product.until(
        lambda: status() == "WORKFLOW_EXECUTION_STATUS_COMPLETED", what="the workflow completed"
    )


def _uri_or_none(product: Product, namespace: str) -> str | None:
    try:
        return product.uri(namespace)
    except AssertionError:
        return None


def _password(uri: str) -> str:
    return uri.split("://", 1)[1].split("@", 1)[0].split(":", 1)[1]
