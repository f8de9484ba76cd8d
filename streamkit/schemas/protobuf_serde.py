"""``ProtobufSerde``: an app's Protobuf values (or keys) in Confluent's wire format, the
counterpart of confluent-kafka's ``ProtobufSerializer`` and ``ProtobufDeserializer``.

The type is a generated message class (``protoc --python_out``, or one built with
protobuf's ``message_factory``). At start the app registers the class's file as a base64
``FileDescriptorProto`` under the ``TopicNameStrategy`` subject, as confluent-kafka's Python
serializer does; the files it imports are registered first under their own names and
referenced (except Protobuf's well-known types, which every client has). A schema that breaks the subject's compatibility refuses the start with the
registry's reason (it names the field number). Each record carries the message-index array
of the class's message, so consumers in any language find the message in the file.
Records written by other producers with other versions of the schema decode into the class
by Protobuf's own wire rules (unknown field numbers are kept aside, missing ones default).

``app.topic("orders", value_type=ProtobufSerde(Order, "http://registry:8081"))``
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from google.protobuf import json_format
from google.protobuf.descriptor import FileDescriptor
from google.protobuf.message import DecodeError, Message

from streamkit.schemas.protobuf_wire import decode_indexes, encode_indexes, message_indexes
from streamkit.schemas.serdes import RegistrySerde, SchemaRegistrationError

__all__ = ["ProtobufSerde"]


_BUILTIN = ("google/protobuf/", "google/type/", "confluent/")


def _file_text(file: FileDescriptor) -> str:
    return base64.standard_b64encode(file.serialized_pb).decode()


class ProtobufSerde(RegistrySerde):
    schema_type = "PROTOBUF"

    def __init__(self, message_class: type[Message], registry_url: str, *, subject: str | None = None,
                 auto_register: bool = True, config: Mapping[str, str] | None = None) -> None:
        descriptor = getattr(message_class, "DESCRIPTOR", None)
        if not isinstance(message_class, type) or not issubclass(message_class, Message) or descriptor is None:
            raise TypeError(f"ProtobufSerde takes a generated Protobuf message class, not {message_class!r}")
        super().__init__(descriptor.full_name, registry_url, subject=subject, auto_register=auto_register,
                         config=config)
        self.message_class = message_class
        self._indexes = encode_indexes(message_indexes(descriptor))

    def schema_text(self) -> str:
        return _file_text(self.message_class.DESCRIPTOR.file)

    def registration(self) -> dict[str, Any]:
        body = super().registration()
        references = self._references(self.message_class.DESCRIPTOR.file)
        if references:
            body["references"] = references
        return body

    def _references(self, file: FileDescriptor) -> list[dict[str, Any]]:
        """Register (or look up) each file ``file`` imports, under the file's name as its
        subject (Confluent's reference subject name strategy), imports first."""
        out = []
        for dependency in file.dependencies:
            if dependency.name.startswith(_BUILTIN):
                continue  # every client has the well-known types; Confluent's do not register them
            body: dict[str, Any] = {"schema": _file_text(dependency), "schemaType": "PROTOBUF"}
            nested = self._references(dependency)
            if nested:
                body["references"] = nested
            subject = quote(dependency.name, safe="")
            if self.auto_register:
                self._http("POST", f"/subjects/{subject}/versions", body)
            found = self._http("POST", f"/subjects/{subject}", body)
            out.append({"name": dependency.name, "subject": dependency.name, "version": int(found["version"])})
        return out

    def dumps(self, obj: Any) -> bytes:
        header = self._header()
        if isinstance(obj, dict):
            obj = json_format.ParseDict(obj, self.message_class())
        if not isinstance(obj, self.message_class):
            raise SchemaRegistrationError(f"ProtobufSerde({self.name}) writes {self.name} messages or dicts, "
                                          f"not {type(obj).__name__}")
        encoded: bytes = obj.SerializeToString()
        return header + self._indexes + encoded

    def loads(self, data: bytes) -> Any:
        _, body = self._split(data)
        _, offset = decode_indexes(body, 0)
        try:
            return self.message_class.FromString(bytes(body[offset:]))
        except DecodeError as exc:
            raise ValueError(f"not a {self.name}: {exc}") from None
