"""P4Runtime's Python modules generated again for the installed protobuf (run by bootstrap.sh).

The p4runtime wheel (1.4.1, the version p4runtime-shell pins) ships modules made by an old
protoc. protobuf >= 4 parses and builds messages in C (upb) but refuses such modules
("Descriptors cannot be created directly"); with protobuf 3.20, pure Python, the controller and
every softswitch's P4Runtime server spent most of their CPU building and parsing messages. This
generates the same modules again with grpc_tools' protoc (installed beside the protobuf it
matches) from the file descriptors the old modules embed, and writes them over the old ones in
the installed package. Nothing of P4Runtime is kept in this repository.

Idempotent: when the modules import under the installed protobuf, it only says so.
Usage: python scripts/p4runtime_modules.py
"""
from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path

PACKAGE = "p4"   # the p4runtime wheel's top-level package
CHECK = "import p4.v1.p4runtime_pb2, p4.v1.p4runtime_pb2_grpc, p4.config.v1.p4info_pb2"


def importable() -> bool:
    """Whether P4Runtime's modules import in a fresh interpreter (they are cached once imported)."""
    return subprocess.run([sys.executable, "-c", CHECK], capture_output=True).returncode == 0


def package_root() -> Path:
    """The directory that holds the p4 package, found without importing its modules."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        sys.exit("p4runtime_modules: the p4runtime package is not installed (pip install p4runtime)")
    return Path(next(iter(spec.submodule_search_locations))).parent


def embedded_descriptor(module: Path) -> bytes:
    """The serialized FileDescriptorProto an old-style generated module passes as serialized_pb=."""
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, ast.keyword) and node.arg == "serialized_pb":
            return ast.literal_eval(node.value)
    raise SystemExit(f"p4runtime_modules: {module} embeds no serialized_pb (not protoc's old output?)")


def descriptor_set(root: Path) -> tuple[bytes, list[str]]:
    """A FileDescriptorSet of P4Runtime's files and what they import; with P4Runtime's file names."""
    from google.protobuf import descriptor_pb2

    ours: dict[str, descriptor_pb2.FileDescriptorProto] = {}
    for module in sorted((root / PACKAGE).rglob("*_pb2.py")):
        proto = descriptor_pb2.FileDescriptorProto.FromString(embedded_descriptor(module))
        ours[proto.name] = proto
    imported: dict[str, descriptor_pb2.FileDescriptorProto] = {}
    for proto in ours.values():
        for dep in proto.dependency:
            if dep in ours or dep in imported:
                continue
            # google/rpc/status.proto -> google.rpc.status_pb2, already generated for this protobuf
            module = importlib.import_module(dep.removesuffix(".proto").replace("/", ".") + "_pb2")
            imported[dep] = descriptor_pb2.FileDescriptorProto()
            module.DESCRIPTOR.CopyToProto(imported[dep])
    files = descriptor_pb2.FileDescriptorSet(file=[*imported.values(), *ours.values()])
    return files.SerializeToString(), sorted(ours)


def generate(root: Path) -> list[Path]:
    """protoc's modules for P4Runtime's files, written over the installed ones; returns them."""
    from grpc_tools import protoc

    data, names = descriptor_set(root)
    written = []
    with tempfile.TemporaryDirectory() as tmp:
        descriptors = Path(tmp, "p4runtime.pb")
        descriptors.write_bytes(data)
        out = Path(tmp, "out")
        out.mkdir()
        args = ["protoc", f"--descriptor_set_in={descriptors}", f"--python_out={out}", f"--grpc_python_out={out}", *names]
        if protoc.main(args) != 0:
            raise SystemExit(f"p4runtime_modules: protoc failed on {' '.join(names)}")
        for new in sorted(out.rglob("*.py")):
            target = root / new.relative_to(out)
            if not target.exists():   # only the modules the wheel has (the same set: a _pb2 and a _pb2_grpc per file)
                continue
            temp = target.with_suffix(".py.new")
            temp.write_bytes(new.read_bytes())
            os.replace(temp, target)
            written.append(target)
    return written


def main() -> int:
    import google.protobuf

    if importable():
        print(f"p4runtime_modules: P4Runtime's modules import under protobuf {google.protobuf.__version__}")
        return 0
    root = package_root()
    written = generate(root)
    if not importable():
        sys.exit(f"p4runtime_modules: the modules generated in {root / PACKAGE} still do not import: "
                 f"run `{sys.executable} -c '{CHECK}'` to see why")
    print(f"p4runtime_modules: generated {len(written)} P4Runtime modules for protobuf "
          f"{google.protobuf.__version__} in {root / PACKAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
