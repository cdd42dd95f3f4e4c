"""Names users and scripts rely on; keep them stable (see DESIGN.md, "Names")."""

from __future__ import annotations

from enum import StrEnum

GROUP = "dbi.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "DBInstance"
PLURAL = "dbinstances"
SHORT_NAME = "dbi"

TASK_QUEUE = "dbi"
FIELD_MANAGER = "dbi-orchestrator"
FINALIZER = "dbi.dev/teardown"
INSTANCE_LABEL = "dbi.dev/instance"


def workflow_id(namespace: str, name: str) -> str:
    """Return the id of the workflow that converges one DBInstance."""
    return f"dbinstance/{namespace}/{name}"


class SearchAttributeType(StrEnum):
    KEYWORD = "Keyword"
    BOOL = "Bool"


# Registered on the Temporal namespace by the local stack (and by operators in a
# real deployment); the workflow upserts them as an instance progresses.
SEARCH_ATTRIBUTES: dict[str, SearchAttributeType] = {
    "DbiNamespace": SearchAttributeType.KEYWORD,
    "DbiName": SearchAttributeType.KEYWORD,
    "DbiPhase": SearchAttributeType.KEYWORD,
    "DbiStep": SearchAttributeType.KEYWORD,
    "DbiReady": SearchAttributeType.BOOL,
}
