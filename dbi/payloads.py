"""How dbi's values are written to Temporal and read back: ``DATA_CONVERTER``.

Every payload (workflow inputs, activity inputs and results, local activities' markers,
signals, updates and queries) is Pydantic's JSON without the fields that hold their
default. They decode to that default, so a step's result carries what the step said
and not ten empty facts: an idle pass's marker is less than half the bytes in history.
A model's defaults are therefore part of what its payloads mean: change one only with
a new field, or the histories recorded before it decode differently
(``tests/workflows/test_payload_defaults.py`` fails on such a change).
"""

from __future__ import annotations

from typing import Any

from pydantic_core import SchemaSerializer, core_schema
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import PydanticJSONPlainPayloadConverter
from temporalio.converter import (
    CompositePayloadConverter,
    DataConverter,
    DefaultPayloadConverter,
    JSONPlainPayloadConverter,
)


class _CompactJSON(PydanticJSONPlainPayloadConverter):
    """Pydantic's JSON without the fields that hold their default."""

    _serializer = SchemaSerializer(core_schema.any_schema())

    def to_payload(self, value: Any) -> Payload:
        data = self._serializer.to_json(value, exclude_defaults=True)
        return Payload(metadata={"encoding": self.encoding.encode()}, data=data)


class _PayloadConverter(CompositePayloadConverter):
    """The SDK's default converters, with ``_CompactJSON`` for JSON."""

    def __init__(self) -> None:
        compact = _CompactJSON()
        super().__init__(
            *(
                compact if isinstance(c, JSONPlainPayloadConverter) else c
                for c in DefaultPayloadConverter.default_encoding_payload_converters
            )
        )


# Every payload dbi writes to Temporal (inputs, results, markers, messages) and reads back.
DATA_CONVERTER = DataConverter(payload_converter_class=_PayloadConverter)
