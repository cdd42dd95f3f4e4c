"""The credentials Secret as apps and tools read it: CloudNativePG's keys, each of them
working (the uri, the pgpass line, the JDBC URI's parts), under the name
spec.credentials.secretName gives; a rotation rewrites every key that holds the
password at once. Real stack; and the API server's refusals of a bad secretName."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import psycopg
import pytest
from kubernetes import client as k8s

from activities.infra import connection
from activities.infra.trust import trust_file
from dbi import names
from dbi.messages import RotationResult
from tests.activities.lifecycle import SPEC, create
from tests.activities.logins import secret
from tests.appclient import conninfo
from tests.orchestrator import Orchestrator
from tests.stack import Kubectl
from watcher.watcher import Watcher

pytestmark = pytest.mark.stack

NAME = "orders-db"
KEYS = {"username", "user", "password", "database", "dbname", "host", "port"}
KEYS |= {"uri", "jdbc-uri", "pgpass"}


def connects_with_pgpass(data: dict[str, str], tmp_path: Path) -> bool:
    """libpq finds the password in the Secret's pgpass line alone (PGPASSFILE)."""
    passfile = tmp_path / "pgpass"
    passfile.write_text(data["pgpass"])
    passfile.chmod(0o600)
    os.environ["PGPASSFILE"] = str(passfile)
    try:
        with psycopg.connect(
            host=data["host"],  # what the pgpass line names
            hostaddr=data["hostaddr"],  # where it is (no cluster DNS on this host)
            port=int(data["port"]),
            sslmode=data["sslmode"],
            sslrootcert=trust_file(data["ca.crt"]),
            user=data["user"],
            dbname=data["dbname"],
            connect_timeout=3,
        ) as conn:
            return conn.execute("SELECT current_user").fetchone() == (data["user"],)
    finally:
        del os.environ["PGPASSFILE"]


def jdbc_parts(jdbc: str) -> tuple[str, int | None, str, str, str]:
    """host, port, database, user and password of a jdbc:postgresql:// URI."""
    parts = urlsplit(jdbc.removeprefix("jdbc:"))
    query = parse_qs(parts.query)
    return (
        parts.hostname or "",
        parts.port,
        parts.path.lstrip("/"),
        query["user"][0],
        query["password"][0],
    )


def check_keys(data: dict[str, str], tmp_path: Path) -> None:
    assert set(data) >= KEYS, sorted(data)
    assert (data["user"], data["dbname"]) == (data["username"], data["database"])
    with psycopg.connect(conninfo(data), connect_timeout=3) as conn:
        assert conn.execute("SELECT current_user, current_database()").fetchone() == (
            data["user"],
            data["dbname"],
        )
    assert connects_with_pgpass(data, tmp_path)
    assert jdbc_parts(data["jdbc-uri"]) == (
        data["host"],
        int(data["port"]),
        data["dbname"],
        data["user"],
        data["password"],
    )


async def test_the_secret_has_cloudnativepg_keys_under_its_chosen_name_and_rotates_whole(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str, kube_api: Any, tmp_path: Path
) -> None:
    spec = {**SPEC, "credentials": {"secretName": NAME}}
    db = await create(orchestrator, namespace, spec)
    assert db["status"]["credentialsSecretName"] == NAME
    data = secret(kube_api, namespace, NAME)
    check_keys(data, tmp_path)
    with pytest.raises(k8s.ApiException) as missing:
        k8s.CoreV1Api(kube_api).read_namespaced_secret("db-credentials", namespace)
    assert missing.value.status == 404

    handle = orchestrator.client.get_workflow_handle(names.workflow_id(namespace, "db"))
    result = await handle.execute_update(names.ROTATE_CREDENTIALS, result_type=RotationResult)
    assert result.secret_name == NAME
    # The Secret as the rotation wrote it: every key already carries the new password.
    rotated = secret(kube_api, namespace, NAME)
    assert rotated["password"] != data["password"]
    for key in ("uri", "jdbc-uri", "pgpass"):  # generated passwords need no escaping
        assert data["password"] not in rotated[key], key
        assert rotated["password"] in rotated[key], key
    check_keys(rotated, tmp_path)


def test_the_keys_escape_what_each_format_must() -> None:
    """A password with URI, query and .pgpass specials stays whole in each key."""
    password = "a:b\\c@d/e?f&g=h%i j"  # noqa: S105 (a test value)
    keys = connection.keys("app", password, "app", "db.example", ca_pem="")
    assert jdbc_parts(keys["jdbc-uri"])[4] == password
    assert unquote(urlsplit(keys["uri"]).password or "") == password
    assert keys["pgpass"] == "db.example:5432:app:app:a\\:b\\\\c@d/e?f&g=h%i j\n"


@pytest.mark.parametrize(
    ("secret_name", "message"),
    [
        ("db-admin", "must not be <name>-admin or <name>-cloudinit"),
        ("db-cloudinit", "must not be <name>-admin or <name>-cloudinit"),
        ("Not_A_Name", "spec.credentials.secretName"),
    ],
)
def test_a_secret_name_that_would_clash_or_is_no_name_is_refused(
    kubectl: Kubectl, namespace: str, dbinstance_crd: str, secret_name: str, message: str
) -> None:
    manifest = {
        "apiVersion": names.API_VERSION,
        "kind": names.KIND,
        "metadata": {"name": "db", "namespace": namespace},
        "spec": {**SPEC, "credentials": {"secretName": secret_name}},
    }
    result = kubectl("apply", "-f", "-", stdin=json.dumps(manifest), check=False)
    assert result.returncode != 0 and message in result.stderr, result.stderr


def test_a_secret_name_cannot_be_added_to_an_existing_instance(
    kubectl: Kubectl, namespace: str, dbinstance_crd: str
) -> None:
    manifest: dict[str, Any] = {
        "apiVersion": names.API_VERSION,
        "kind": names.KIND,
        "metadata": {"name": "db", "namespace": namespace},
        "spec": SPEC,
    }
    kubectl("apply", "-f", "-", stdin=json.dumps(manifest))
    manifest["spec"] = {**SPEC, "credentials": {"secretName": "later"}}
    added = kubectl("apply", "-f", "-", stdin=json.dumps(manifest), check=False)
    assert added.returncode != 0, added.stdout
    assert "secretName is immutable once the instance exists" in added.stderr
