"""An instance's members (``spec.instances``), as the orchestrator wants them (pure).

The first member is the instance's own VM, named as the instance (the one VM of an
instance without replicas); the others are ``<name>-2`` to ``<name>-5``, each with its
data disk ``<member>-data``, its root disk ``<member>-root-<hash of the image>`` and its
cloud-init Secret ``<member>-cloudinit``, all labelled ``dbi.dev/member`` and owned by the
instance whatever its deletionPolicy: a replica's data is a copy of the primary's.

A replica's boot document is the primary's without what only the primary acts on (a
reset, a restore, an upgrade), and with ``replica``: the Service ``<name>-rw`` (which
follows the primary) by its certificate's name and its ClusterIP, the replication role
and its password, the namespace's CA, and the member's slot.

Services: ``<name>`` and ``<name>-rw`` select the primary's pods (KubeVirt labels a VM's
pods with its name), ``<name>-ro`` the replicas' (a replica's VM is created with
``dbi.dev/member-role: replica``), ``<name>-r`` every member's.
"""

from __future__ import annotations

from pydantic import SecretStr

from activities.infra import addresses, manifests, postgres
from activities.infra.kube import Instance, Manifest
from dbi import bootstrap, names, tls
from dbi.bootstrap import Bootstrap

REPLICATION_SECRET_SUFFIX = "-replication"  # noqa: S105 (a name)


def count(instance: Instance) -> int:
    return instance.model.spec.instances or 1


def added(instance: Instance, up_to: int | None = None) -> list[str]:
    """The members besides the instance's own VM (``<name>-2`` on), the first ``up_to``
    members' (default: the spec's)."""
    wanted = count(instance) if up_to is None else up_to
    return [f"{instance.name}-{n}" for n in range(2, wanted + 1)]


def certificate_names(instance: Instance) -> list[str]:
    """The DNS names the instance's certificate carries: its Service's, and with
    spec.instances, those of -rw, -ro and -r too (every member serves the one pair)."""
    ns, name = instance.namespace, instance.name
    suffixes: tuple[str, ...] = ("",)
    if instance.model.spec.instances is not None:
        suffixes = ("", names.RW_SUFFIX, names.RO_SUFFIX, names.ANY_SUFFIX)
    return [n for suffix in suffixes for n in tls.service_names(ns, name + suffix)]


def slot(member: str) -> str:
    """The member's physical replication slot on the primary."""
    return "dbi_" + member.replace("-", "_")


def replication_secret(instance: Instance) -> str:
    return f"{instance.name}{REPLICATION_SECRET_SUFFIX}"


def primary_selector(instance: Instance, member: str | None = None) -> dict[str, str]:
    """The pods of the Service ``<name>``: the instance's, or with spec.instances, the
    primary's (or ``member``'s)."""
    selector = {names.INSTANCE_LABEL: instance.name}
    if instance.model.spec.instances is not None:
        selector[names.VM_NAME_LABEL] = member or addresses.primary_of(instance)
    return selector


def services(instance: Instance, primary: str) -> list[Manifest]:
    """The Services ``<name>-rw`` (of the member ``primary``), ``<name>-ro``, ``<name>-r``."""
    replica = {names.INSTANCE_LABEL: instance.name, names.MEMBER_ROLE_LABEL: names.REPLICA}
    selectors = {
        names.RW_SUFFIX: primary_selector(instance, primary),
        names.RO_SUFFIX: replica,
        names.ANY_SUFFIX: {names.INSTANCE_LABEL: instance.name},
    }
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": instance.child_metadata(instance.name + suffix),
            "spec": {
                "selector": selector,
                "ports": [
                    {
                        "name": "postgresql",
                        "port": postgres.PORT,
                        "targetPort": postgres.PORT,
                        "protocol": "TCP",
                    }
                ],
            },
        }
        for suffix, selector in selectors.items()
    ]


def data_claim(instance: Instance, member: str) -> Manifest:
    claim = manifests.data_claim(instance)
    claim["metadata"] = _metadata(instance, member, f"{member}-data")
    return claim


def root_claim(
    instance: Instance, member: str, image: str, *, storage_class: str | None
) -> Manifest:
    claim = manifests.root_claim(instance, image, storage_class=storage_class)
    name = manifests.root_claim_name(member, image)
    claim["metadata"] = _metadata(
        instance, member, name, annotations={manifests.IMAGE_ANNOTATION: image}
    )
    return claim


def _metadata(
    instance: Instance, member: str, name: str, annotations: dict[str, str] | None = None
) -> Manifest:
    metadata = instance.child_metadata(name, annotations=annotations or {})
    metadata["labels"][names.MEMBER_LABEL] = member
    return metadata


def document(
    primary_doc: Bootstrap, *, host: str, hostaddr: str, password: str, ca_pem: str, member: str
) -> Bootstrap:
    """The replica ``member``'s boot document, from the primary's: ``host`` and
    ``hostaddr`` are the Service ``<name>-rw``'s (it follows the primary)."""
    replica = bootstrap.Replica(
        host=host,
        hostaddr=hostaddr,
        user=names.REPLICATION_USER,
        password=SecretStr(password),
        ca=ca_pem,
        slot=slot(member),
        application_name=member,
    )
    # Keywords: "upgrade" is a step's name too.
    return primary_doc.model_copy(
        update=dict(reset=None, restore=None, upgrade=None, replica=replica)
    )
