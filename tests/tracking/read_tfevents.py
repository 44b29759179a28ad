#!/usr/bin/python3
"""An independent reader of TensorBoard event files, for tests/tracking.

The message definitions are written here from the public spec (tensorflow/core/util/event.proto,
tensorflow/core/framework/summary.proto, tensor.proto, tensor_shape.proto: only the fields llmtrain
writes, with their numbers and types) and decoded by Debian's python3-protobuf; the TFRecord framing
and its masked CRC-32C are checked by a CRC written here (bitwise, from the Castagnoli polynomial),
independent of llmtrain's core/crc32c.

Usage: read_tfevents.py FILE  -> JSON on stdout:
  {"file_version": "...", "scalars": [{"step", "wall_time", "tag", "value"}],
   "texts": [{"step", "tag", "plugin", "text"}]}
Exit 1 with "corrupted record" on stderr when a CRC does not match.
"""
import json
import struct
import sys

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

F = descriptor_pb2.FieldDescriptorProto


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(data: bytes) -> int:
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def field(msg, name, number, ftype, label=F.LABEL_OPTIONAL, type_name=None):
    f = msg.field.add(name=name, number=number, type=ftype, label=label)
    if type_name:
        f.type_name = type_name


def build_messages():
    fd = descriptor_pb2.FileDescriptorProto(name="llmt_test_event.proto", package="tbtest", syntax="proto3")
    shape = fd.message_type.add(name="TensorShapeProto")
    dim = shape.nested_type.add(name="Dim")
    field(dim, "size", 1, F.TYPE_INT64)
    field(dim, "name", 2, F.TYPE_STRING)
    field(shape, "dim", 2, F.TYPE_MESSAGE, F.LABEL_REPEATED, ".tbtest.TensorShapeProto.Dim")
    field(shape, "unknown_rank", 3, F.TYPE_BOOL)
    tensor = fd.message_type.add(name="TensorProto")
    field(tensor, "dtype", 1, F.TYPE_INT32)  # DataType enum; DT_STRING = 7
    field(tensor, "tensor_shape", 2, F.TYPE_MESSAGE, type_name=".tbtest.TensorShapeProto")
    field(tensor, "string_val", 8, F.TYPE_BYTES, F.LABEL_REPEATED)
    meta = fd.message_type.add(name="SummaryMetadata")
    plugin = meta.nested_type.add(name="PluginData")
    field(plugin, "plugin_name", 1, F.TYPE_STRING)
    field(plugin, "content", 2, F.TYPE_BYTES)
    field(meta, "plugin_data", 1, F.TYPE_MESSAGE, type_name=".tbtest.SummaryMetadata.PluginData")
    field(meta, "display_name", 2, F.TYPE_STRING)
    summary = fd.message_type.add(name="Summary")
    value = summary.nested_type.add(name="Value")
    field(value, "node_name", 7, F.TYPE_STRING)
    field(value, "tag", 1, F.TYPE_STRING)
    field(value, "metadata", 9, F.TYPE_MESSAGE, type_name=".tbtest.SummaryMetadata")
    field(value, "simple_value", 2, F.TYPE_FLOAT)
    field(value, "tensor", 8, F.TYPE_MESSAGE, type_name=".tbtest.TensorProto")
    field(summary, "value", 1, F.TYPE_MESSAGE, F.LABEL_REPEATED, ".tbtest.Summary.Value")
    event = fd.message_type.add(name="Event")
    field(event, "wall_time", 1, F.TYPE_DOUBLE)
    field(event, "step", 2, F.TYPE_INT64)
    field(event, "file_version", 3, F.TYPE_STRING)
    field(event, "summary", 5, F.TYPE_MESSAGE, type_name=".tbtest.Summary")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    desc = pool.FindMessageTypeByName("tbtest.Event")
    if hasattr(message_factory, "GetMessageClass"):
        return message_factory.GetMessageClass(desc)
    return message_factory.MessageFactory(pool).GetPrototype(desc)


def records(data: bytes):
    at = 0
    index = 0
    while at + 12 <= len(data):
        header = data[at:at + 8]
        (length,) = struct.unpack("<Q", header)
        (len_crc,) = struct.unpack("<I", data[at + 8:at + 12])
        if len_crc != masked(header):
            raise ValueError(f"corrupted record {index} at offset {at}: length CRC")
        if at + 16 + length > len(data):
            raise ValueError(f"truncated record {index} at offset {at}")
        payload = data[at + 12:at + 12 + length]
        (data_crc,) = struct.unpack("<I", data[at + 12 + length:at + 16 + length])
        if data_crc != masked(payload):
            raise ValueError(f"corrupted record {index} at offset {at}: data CRC")
        yield payload
        at += 16 + length
        index += 1
    if at != len(data):
        raise ValueError(f"{len(data) - at} trailing bytes after record {index}")


def main():
    Event = build_messages()
    out = {"file_version": None, "scalars": [], "texts": []}
    with open(sys.argv[1], "rb") as f:
        data = f.read()
    try:
        for i, payload in enumerate(records(data)):
            e = Event()
            e.ParseFromString(payload)
            if i == 0:
                out["file_version"] = e.file_version
                continue
            for v in e.summary.value:
                if v.HasField("tensor"):
                    out["texts"].append({"step": e.step, "tag": v.tag, "plugin": v.metadata.plugin_data.plugin_name,
                                         "dtype": v.tensor.dtype,
                                         "text": b"".join(v.tensor.string_val).decode("utf-8")})
                else:
                    out["scalars"].append({"step": e.step, "wall_time": e.wall_time, "tag": v.tag,
                                           "value": v.simple_value})
    except ValueError as err:
        print(f"{sys.argv[1]}: {err}", file=sys.stderr)
        sys.exit(1)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
