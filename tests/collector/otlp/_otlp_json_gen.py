"""Varied OTLP/JSON requests (seeded), and the reference reading through protobuf's JSON parser.

The generator writes what the OTLP/JSON mapping allows: lowerCamelCase or proto field names,
64-bit integers as strings or numbers, enums as numbers or names, attributes of every `AnyValue`
kind (nested arrays and key-value lists, base64 bytes, null members), events, links with flags
and trace state, statuses, several resources and scopes, unknown fields, and some items with ids
of the wrong length (rejected, not refused).

`via_protobuf` is how OTLP/JSON was read before it was decoded straight to SDK objects: hex ids
rewritten as base64, `json_format.ParseDict` into the protobuf request, then `decode.py`.
"""

from __future__ import annotations

import base64
import copy
import random
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

_KINDS = ["SPAN_KIND_UNSPECIFIED", "SPAN_KIND_INTERNAL", "SPAN_KIND_SERVER", "SPAN_KIND_CLIENT", "SPAN_KIND_PRODUCER"]
_CODES = ["STATUS_CODE_UNSET", "STATUS_CODE_OK", "STATUS_CODE_ERROR"]
_ID_KEYS = ("traceId", "trace_id", "spanId", "span_id", "parentSpanId", "parent_span_id")


class Gen:
    """One seeded generator of requests."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def key(self, camel: str, snake: str) -> str:
        return snake if self.rng.random() < 0.2 else camel

    def u64(self, value: int) -> Any:
        return str(value) if self.rng.random() < 0.6 else value

    def hex_id(self, size: int) -> str:
        raw = self.rng.randbytes(size if self.rng.random() > 0.03 else size - 1)
        text = raw.hex()
        return text.upper() if self.rng.random() < 0.2 else text

    def any_value(self, depth: int = 0) -> dict[str, Any]:
        choice = self.rng.randrange(9 if depth < 2 else 7)
        rng = self.rng
        if choice == 0:
            return {self.key("stringValue", "string_value"): rng.choice(["", "tëxt", "a\nb", "\U0001f600 ok"])}
        if choice == 1:
            return {"boolValue": rng.random() < 0.5}
        if choice == 2:
            return {self.key("intValue", "int_value"): self.u64(rng.randint(-(2**63), 2**63 - 1))}
        if choice == 3:
            return {"doubleValue": rng.choice([0.5, -1e300, 3, "1e3", "-0.0", "2.5"])}
        if choice == 4:
            raw = rng.randbytes(rng.randrange(6))
            encoded = base64.b64encode(raw) if rng.random() < 0.5 else base64.urlsafe_b64encode(raw).rstrip(b"=")
            return {"bytesValue": encoded.decode()}
        if choice == 5:
            return {}
        if choice == 6:
            return {"stringValue": None, "intValue": "7"}
        if choice == 7:
            return {"arrayValue": {"values": [self.any_value(depth + 1) for _ in range(rng.randrange(3))]}}
        return {self.key("kvlistValue", "kvlist_value"): {"values": self.attributes(depth + 1)}}

    def attributes(self, depth: int = 0) -> list[dict[str, Any]]:
        count = self.rng.randrange(5)
        return [
            {"key": self.rng.choice(["a", "b", "gen_ai.x", "k"]), "value": self.any_value(depth)} for _ in range(count)
        ]

    def enum(self, names: list[str]) -> Any:
        index = self.rng.randrange(len(names))
        return names[index] if self.rng.random() < 0.3 else index

    def event(self) -> dict[str, Any]:
        return {
            self.key("timeUnixNano", "time_unix_nano"): self.u64(self.rng.randrange(2**62)),
            "name": f"event {self.rng.randrange(9)}",
            "attributes": self.attributes(),
            "droppedAttributesCount": self.rng.randrange(3),
        }

    def link(self) -> dict[str, Any]:
        link: dict[str, Any] = {"traceId": self.hex_id(16), self.key("spanId", "span_id"): self.hex_id(8)}
        if self.rng.random() < 0.5:
            link.update(traceState="k=v,other=x", flags=self.rng.choice([0, 1, 0x101, 0x301]))
        link["attributes"] = self.attributes()
        return link

    def span(self) -> dict[str, Any]:
        rng = self.rng
        span: dict[str, Any] = {
            "traceId": self.hex_id(16),
            self.key("spanId", "span_id"): self.hex_id(8),
            self.key("parentSpanId", "parent_span_id"): rng.choice(["", self.hex_id(8)]),
            "name": rng.choice(["chat gpt-4o", "invoke_agent", "execute_tool x"]),
            "kind": self.enum(_KINDS),
            self.key("startTimeUnixNano", "start_time_unix_nano"): self.u64(rng.randrange(2**62)),
            "endTimeUnixNano": self.u64(rng.randrange(2**62)),
            "attributes": self.attributes(),
            "events": [self.event() for _ in range(rng.randrange(3))],
            "links": [self.link() for _ in range(rng.randrange(2))],
            "status": rng.choice([{}, {"code": self.enum(_CODES), "message": "why"}]),
            "futureField": {"x": 1},
        }
        if rng.random() < 0.4:
            span.update(traceState="vendor=v", flags=rng.choice([1, 0x101, 0x301]), droppedEventsCount=2)
            span[self.key("droppedAttributesCount", "dropped_attributes_count")] = rng.randrange(5)
            span["droppedLinksCount"] = "3"
        return span

    def log_record(self) -> dict[str, Any]:
        rng = self.rng
        record: dict[str, Any] = {
            "timeUnixNano": self.u64(rng.choice([0, rng.randrange(2**62)])),
            self.key("observedTimeUnixNano", "observed_time_unix_nano"): self.u64(rng.randrange(2**62)),
            "severityNumber": rng.choice([0, 9, "SEVERITY_NUMBER_WARN", 17]),
            "severityText": rng.choice(["", "INFO"]),
            "attributes": self.attributes(),
            "eventName": rng.choice(["", "gen_ai.user.message"]),
            "flags": rng.choice([0, 1]),
        }
        if rng.random() < 0.8:
            record["body"] = self.any_value()
        if rng.random() < 0.6:
            record.update(traceId=self.hex_id(16), spanId=self.hex_id(8))
        return record

    def resource(self) -> dict[str, Any]:
        resource: dict[str, Any] = {"attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}]}
        resource["attributes"] += self.attributes()
        if self.rng.random() < 0.3:
            resource["droppedAttributesCount"] = 1
        return resource

    def scope(self) -> dict[str, Any]:
        return {"name": "lib", "version": self.rng.choice(["", "1.2"]), "attributes": self.attributes()}

    def request(self, logs: bool) -> dict[str, Any]:
        outer, middle, inner = (
            ("resourceLogs", "scopeLogs", "logRecords") if logs else ("resourceSpans", "scopeSpans", "spans")
        )
        make = self.log_record if logs else self.span
        groups = []
        for _ in range(self.rng.randrange(1, 3)):
            scopes = [
                {"scope": self.scope(), "schemaUrl": "https://s", inner: [make() for _ in range(self.rng.randrange(4))]}
                for _ in range(self.rng.randrange(1, 3))
            ]
            groups.append(
                {"resource": self.resource(), middle: scopes, "schemaUrl": self.rng.choice(["", "https://r"])}
            )
        return {outer: groups}


def via_protobuf(document: dict[str, Any], logs: bool) -> Any:
    """The protobuf request of an OTLP/JSON document, read the old way (hex ids -> base64, ParseDict)."""
    document = copy.deepcopy(document)
    _rewrite_ids(document)
    message: Any = ExportLogsServiceRequest() if logs else ExportTraceServiceRequest()
    json_format.ParseDict(document, message, ignore_unknown_fields=True)
    return message


def _rewrite_ids(node: Any) -> None:
    if isinstance(node, list):
        for item in node:
            _rewrite_ids(item)
    elif isinstance(node, dict):
        for key, value in node.items():
            if key in _ID_KEYS and isinstance(value, str) and "values" not in node:
                node[key] = base64.b64encode(bytes.fromhex(value)).decode()
            else:
                _rewrite_ids(value)
