"""Protobuf definitions of the catalog's objects and actions, with checked-in generated code.

``objects.proto`` and ``actions.proto`` are the source; ``*_pb2.py`` and ``*_pb2.pyi`` are
generated from the repository root with::

    .venv/bin/python -m grpc_tools.protoc -I. --python_out=. --pyi_out=. \\
        lake_core/catalog/proto/objects.proto lake_core/catalog/proto/actions.proto
"""
