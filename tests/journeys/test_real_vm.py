"""The journey on a real VM: qemu boots dbi's image (``images/``, built when missing), and
everything inside it is the image's: dbi-bootstrap, PostgreSQL, the exporter.

The stand-in boots a VM on qemu when its image is one of the ``qemu-`` dev images
(``devstack.vmstandin.qemu``); under TCG, software emulation, a boot takes about a
minute, so this is one journey with one VM at a time: create on PostgreSQL 17, connect
verify-full through the Service, scrape the exporter through the metrics Service, stop
and start, rotate, back up, upgrade to 18 (pg_upgrade inside the VM, on the root disk
of the 18 image), delete. Skipped, saying why, only where qemu cannot run at all.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import psycopg
import pytest

from devstack import postgresql, tools
from devstack.orchestrator import IMAGES_NAMESPACE
from devstack.vmstandin import qemu
from images import build as images
from images.recipe import EXPORTER_PORT, Recipe
from tests.journeys.product import NAME, Product, patch, rows, sql

pytestmark = pytest.mark.stack

FROM, TO = postgresql.BY_MAJOR[17], postgresql.BY_MAJOR[18]


def qemu_image(build: str) -> str:
    return f"{IMAGES_NAMESPACE}/qemu-{postgresql.image_name(build)}"


@pytest.fixture(scope="module")
def built() -> None:
    """dbi's images of both builds, built here (with progress) rather than inside the
    stand-in's first boot, so a build that fails says so."""
    if missing := qemu.missing_tools():
        pytest.skip(
            f"no real VM can boot here: {', '.join(missing)} missing "
            f"(apt-get install {qemu.PACKAGES}; .ci/run does)"
        )
    for build in (FROM, TO):
        images.build(Recipe(build), images.default_cache(), builds=tools.CACHE_DIR)


def metrics(product: Product, namespace: str) -> str:
    service = product.get(namespace, "service", f"{NAME}-metrics")
    url = f"http://{service['spec']['clusterIP']}:{EXPORTER_PORT}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        return str(response.read().decode())


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
    sample = product.sample.read_text().replace("version: 18", "version: 17")
    sample += f"  image: {qemu_image(FROM)}\n"
    product.kubectl("apply", "-n", namespace, "-f", "-", stdin=sample)
    product.wait(namespace, "condition=Ready", timeout=900)
    uri = product.uri(namespace)
    assert "sslmode=verify-full" in uri
    sql(uri, "CREATE TABLE orders (id int PRIMARY KEY, item text)")
    sql(uri, "INSERT INTO orders VALUES (1, 'tea'), (2, 'milk')")
    assert str(sql(uri, "SHOW server_version")[0]).startswith("17.")
    # The image's exporter, through the metrics Service, reads the server over its socket.
    scraped = product.until(
        lambda: "pg_up 1" in (text := metrics(product, namespace)) and text,
        what="the exporter's pg_up 1 through the metrics Service",
        timeout=180,
    )
    assert 'short_version="17.' in scraped

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

    # A major upgrade: the VM boots the 18 image's root disk, whose dbi-bootstrap runs
    # pg_upgrade with the 17 binaries the image carries.
    patch(product, namespace, {"version": 18, "image": qemu_image(TO)})
    db = product.until(
        lambda: (
            (d := product.get(namespace))["status"]
            .get("observed", {})
            .get("postgresVersion", "")
            .startswith("18.")
            and d
        ),
        what="the instance on PostgreSQL 18",
        timeout=1200,
    )
    assert db["status"]["observed"]["postgresVersion"].startswith("18.")
    product.converged(namespace, timeout=900)
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
