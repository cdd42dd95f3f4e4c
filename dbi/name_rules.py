"""The DBInstance CRD's rules on metadata.name (``dbi.crd`` renders them at the root)."""

from __future__ import annotations

from dbi import names

# The name every child carries as a prefix: a DNS-1035 label with room for the longest
# suffix. The API server checks rules at the root with metadata.name in reach.
NAME_RULES = [
    {
        "rule": "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",
        "message": "metadata.name must be a DNS-1035 label (lower-case letters, digits and "
        "'-', starting with a letter, ending with a letter or digit; no '.'), as the names "
        "of the instance's VM, Services and Secrets are made from it",
        "reason": "FieldValueInvalid",
    },
    {
        "rule": f"size(self.metadata.name) <= {names.INSTANCE_NAME_MAX}",
        "message": f"metadata.name must be at most {names.INSTANCE_NAME_MAX} characters, so "
        f"that <name>{names.LONGEST_CHILD_SUFFIX} stays within 63",
        "reason": "FieldValueInvalid",
    },
    {
        "rule": "!has(self.spec) || !has(self.spec.instances) || self.spec.instances == 1"
        f" || size(self.metadata.name) <= {names.MEMBER_NAME_MAX}",
        "message": f"metadata.name must be at most {names.MEMBER_NAME_MAX} characters with "
        "spec.instances above 1, so that <name>-5-root-<6 hex> stays within 63",
        "fieldPath": ".spec.instances",
        "reason": "FieldValueInvalid",
    },
    {
        "rule": "!has(self.spec) || !has(self.spec.credentials)"
        " || !has(self.spec.credentials.secretName)"
        " || !(self.spec.credentials.secretName in"
        " [self.metadata.name + '-admin', self.metadata.name + '-cloudinit'])",
        "message": "spec.credentials.secretName must not be <name>-admin or <name>-cloudinit: "
        "those are the instance's own Secrets",
        "fieldPath": ".spec.credentials.secretName",
        "reason": "FieldValueInvalid",
    },
]
