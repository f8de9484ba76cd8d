# The module `protoc --python_out=. orders.proto` generates for the schema-registry guide's
# example (tests/docs puts it on the path of that page's session), for:
#   syntax = "proto3"; package shop;
#   message Order { int64 id = 1; string item = 2; int32 qty = 3; }
# Built with protobuf's builder, as protoc's own output is (no protoc on the test machines).
"""Generated protocol buffer code for orders.proto."""

from google.protobuf import descriptor_pool as _descriptor_pool
from google.protobuf.internal import builder as _builder

DESCRIPTOR = _descriptor_pool.Default().AddSerializedFile(b'\n\x0corders.proto\x12\x04shop"=\n\x05Order\x12\x0e\n\x02id\x18\x01 \x01(\x03R\x02id\x12\x12\n\x04item\x18\x02 \x01(\tR\x04item\x12\x10\n\x03qty\x18\x03 \x01(\x05R\x03qtyb\x06proto3')

_globals = globals()
_builder.BuildMessageAndEnumDescriptors(DESCRIPTOR, _globals)
_builder.BuildTopDescriptorsAndMessages(DESCRIPTOR, "orders_pb2", _globals)
