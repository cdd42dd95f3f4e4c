"""An ``Instance`` of plain data, for ownership decisions."""

from __future__ import annotations

from activities.infra.kube import Instance
from dbi import names
from dbi.models import DBInstance

UID, OLD = "uid-new", "uid-old"


def instance(*, adopt: str | None = None, policy: str = "Delete") -> Instance:
    annotations = {names.ADOPT_ANNOTATION: adopt} if adopt else {}
    model = DBInstance.model_validate(
        {
            "metadata": {"name": "db", "namespace": "shop", "annotations": annotations},
            "spec": {
                "version": 18,
                "resources": {"cpu": 1, "memory": "1Gi", "storage": "1Gi"},
                "deletionPolicy": policy,
            },
        }
    )
    return Instance(model=model, uid=UID, generation=1, deleting=False, finalizers=())
