"""The journey on a real VM: qemu boots dbi's image (``images/``, built when missing), and
everything inside it is the image's: dbi-bootstrap, PostgreSQL, the exporter.

The stand-in boots a VM on qemu when its image is one of the ``qemu-`` dev images
(``devstack.vmstandin.qemu``); under TCG, software emulation, a boot takes about a
minute, so these are two journeys with one VM running at a time. One: create on
PostgreSQL 16.13, connect verify-full through the Service, scrape the exporter through
the metrics Service, stop and start, rotate, back up, repave to 16.15 (a new root disk
from that image, the data disk kept), upgrade to 17 (pg_upgrade inside the VM, on the
root disk of the 17 image), delete. Two: on 18, a backup into a tenant's bucket on
this machine's address, restored into a new instance by its VM's first boot.
Skipped, saying why, only where qemu cannot run at all (or, the second, where this
machine has no address a VM could reach it at).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import yaml

from devstack import postgresql, s3server, tools
from devstack.orchestrator import IMAGES_NAMESPACE
from devstack.vmstandin import qemu
from images import build as images
from images.recipe import Recipe
from tests.journeys.product import NAME, Product, host_address, patch, reading, rows, sql
from tests.stack import S3_BUCKET

# A journey boots real VMs under TCG five times or more (about a minute each, longer on
# a loaded machine) and runs pg_upgrade: more than the suite's 10-minute hang guard.
pytestmark = [pytest.mark.stack, pytest.mark.timeout(1800)]

# The first journey's builds: created on, repaved to, upgraded to; the second's.
FROM, REPAVED, UPGRADED, RESTORED = postgresql.REAL_VM_BUILDS


def qemu_image(build: str) -> str:
    return f"{IMAGES_NAMESPACE}/qemu-{postgresql.image_name(build)}"


@pytest.fixture(scope="module")
def built() -> None:
    """dbi's images of the journeys' builds, built here (with progress) rather than
    inside the stand-in's first boot, so a build that fails says so."""
    if missing := qemu.missing_tools():
        pytest.skip(
            f"no real VM can boot here: {', '.join(missing)} missing "
            f"(apt-get install {qemu.PACKAGES}; .ci/run does)"
        )
    for build in (FROM, REPAVED, UPGRADED, RESTORED):
        images.build(Recipe(build), images.default_cache(), builds=tools.CACHE_DIR)


@pytest.fixture(scope="module")
def reachable_s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A bucket on this machine's own address, which a VM behind qemu's user networking
    reaches (loopback it cannot: its 127.0.0.1 is its own)."""
    host = host_address()
    if host is None:
        pytest.skip("this machine has no address but loopback: no VM can reach a bucket here")
    with s3server.serving(tmp_path_factory.mktemp("s3-vm"), bucket=S3_BUCKET, host=host) as url:
        yield url


def manifest(product: Product, name: str, build: str, **spec: object) -> str:
    """The sample as ``name``, on the qemu image of ``build``, with ``spec`` added."""
    body = yaml.safe_load(product.sample.read_text())
    body["metadata"]["name"] = name
    major = int(build.split(".", maxsplit=1)[0])
    body["spec"] |= {"version": major, "image": qemu_image(build), **spec}
    return json.dumps(body)


def on(product: Product, namespace: str, version: str) -> None:
    """Wait until the instance runs a PostgreSQL ``version`` (a prefix) and has converged."""
    product.until(
        lambda: (
            product.get(namespace)["status"]
            .get("observed", {})
            .get("postgresVersion", "")
            .startswith(version)
        ),
        what=f"the instance on PostgreSQL {version}",
        timeout=1200,
    )
    product.converged(namespace, timeout=900)


def qemu_running(disk: Path) -> bool:
    """Whether a qemu process has the VM's data disk open."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if (
            argv
            and argv[0].endswith(b"qemu-system-x86_64")
            and str(disk).encode() in b"".join(argv)
        ):
            return True
    return False


def test_a_real_vm_from_create_to_upgrade_and_delete(built: None, product: Product) -> None:
    namespace = product.namespaces["qemu"]
    product.kubectl("apply", "-n", namespace, "-f", "-", stdin=manifest(product, NAME, FROM))
    product.wait(namespace, "condition=Ready", timeout=900)
    uri = product.uri(namespace)
    assert "sslmode=verify-full" in uri
    sql(uri, "CREATE TABLE orders (id int PRIMARY KEY, item text)")
    sql(uri, "INSERT INTO orders VALUES (1, 'tea'), (2, 'milk')")
    assert sql(uri, "SHOW server_version") == ("16.13",)
    # The image's exporter, through the metrics Service, reads the server over its socket.
    scraped = product.until(
        lambda: reading(product, namespace),
        what="the exporter's pg_up 1 through the metrics Service",
        timeout=180,
    )
    assert 'short_version="16.13.0"' in scraped

    # A real shutdown (ACPI) and a new boot of the same disks keep the rows.
    patch(product, namespace, {"powerState": "Stopped"})
    product.wait(namespace, "jsonpath={.status.phase}=Stopped", timeout=300)
    with pytest.raises(psycopg.OperationalError):
        sql(uri, "SELECT 1")
    patch(product, namespace, {"powerState": "Running"})
    product.converged(namespace, timeout=900)
    assert rows(product, namespace) == 2

    rotated = product.dbi("rotate", NAME, "-n", namespace)
    assert rotated.returncode == 0, rotated.stderr
    assert product.uri(namespace) != uri
    with pytest.raises(psycopg.OperationalError):
        sql(uri, "SELECT 1")
    assert rows(product, namespace) == 2

    backup = product.dbi("backup", NAME, "-n", namespace)
    assert backup.returncode == 0, (backup.stdout, backup.stderr)
    assert "Completed" in backup.stdout

    # A minor repave: the VM boots a new root disk of the 16.15 image on its data disk.
    patch(product, namespace, {"image": qemu_image(REPAVED)})
    on(product, namespace, "16.15")
    assert rows(product, namespace) == 2
    assert sql(product.uri(namespace), "SHOW server_version") == ("16.15",)

    # A major upgrade: the VM boots the 17 image's root disk, whose dbi-bootstrap runs
    # pg_upgrade with the 16 binaries the image carries.
    patch(product, namespace, {"version": 17, "image": qemu_image(UPGRADED)})
    on(product, namespace, "17.")
    assert rows(product, namespace) == 2

    volume = product.get(namespace, "persistentvolumeclaim", f"{NAME}-data")["spec"]["volumeName"]
    product.kubectl("delete", "dbinstance", NAME, "-n", namespace, "--timeout=300s")
    disks = Path(product.local_stack.state_dir) / "vms" / "disks"
    product.until(
        lambda: not qemu_running(disks / volume),
        what="the VM's qemu gone",
        timeout=120,
    )
    left = json.loads(product.kubectl("get", "vm,vmi", "-n", namespace, "-o", "json").stdout)
    assert left["items"] == []


def test_a_backup_in_a_bucket_restores_into_a_new_real_vm(
    built: None, product: Product, reachable_s3: str
) -> None:
    """The restored VM's first boot fetches the backup itself (docs/guest.md): from the
    tenant's bucket, by the presigned URLs of its document."""
    namespace = product.namespaces["qemu-restore"]
    product.kubectl(
        *("create", "secret", "generic", "s3-keys", "-n", namespace),
        *("--from-literal=AWS_ACCESS_KEY_ID=dbi", "--from-literal=AWS_SECRET_ACCESS_KEY=dbi-key"),
    )
    s3 = {"bucket": S3_BUCKET, "prefix": namespace, "endpoint": reachable_s3}
    target = {"schedule": "0 3 * * *", "target": {"s3": {**s3, "credentialsSecret": "s3-keys"}}}
    product.kubectl(
        "apply", "-n", namespace, "-f", "-", stdin=manifest(product, NAME, RESTORED, backup=target)
    )
    product.wait(namespace, "condition=Ready", timeout=900)
    sql(product.uri(namespace), "CREATE TABLE orders (id int PRIMARY KEY, item text)")
    sql(product.uri(namespace), "INSERT INTO orders VALUES (1, 'tea'), (2, 'milk')")
    taken = product.dbi("backup", NAME, "-n", namespace)
    assert taken.returncode == 0, (taken.stdout, taken.stderr)
    backup = taken.stdout.split()[1].rstrip(":")  # backup <name>: Completed, ...
    patch(product, namespace, {"powerState": "Stopped"})  # one VM at a time on 2 cores
    product.wait(namespace, "jsonpath={.status.phase}=Stopped", timeout=300)

    restore = {"from": {"backup": backup}}
    copy = manifest(product, "copy", RESTORED, restore=restore)
    product.kubectl("apply", "-n", namespace, "-f", "-", stdin=copy)
    product.wait(namespace, "condition=Ready", timeout=900, name="copy")
    assert sql(product.uri(namespace, "copy"), "SELECT count(*) FROM orders") == (2,)
    product.kubectl("delete", "dbinstance", "copy", NAME, "-n", namespace, "--timeout=300s")
