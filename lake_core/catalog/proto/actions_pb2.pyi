from lake_core.catalog.proto import objects_pb2 as _objects_pb2
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ActionType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ACTION_TYPE_UNSPECIFIED: _ClassVar[ActionType]
    CATALOG_CREATE: _ClassVar[ActionType]
    CATALOG_ROLLBACK: _ClassVar[ActionType]
    CATALOG_EXPORT: _ClassVar[ActionType]
    NAMESPACE_CREATE: _ClassVar[ActionType]
    NAMESPACE_ALTER: _ClassVar[ActionType]
    NAMESPACE_DROP: _ClassVar[ActionType]
    TABLE_CREATE: _ClassVar[ActionType]
    TABLE_ALTER: _ClassVar[ActionType]
    TABLE_DROP: _ClassVar[ActionType]
    VIEW_CREATE: _ClassVar[ActionType]
    VIEW_REPLACE: _ClassVar[ActionType]
    VIEW_DROP: _ClassVar[ActionType]
    INDEX_RULE_CREATE: _ClassVar[ActionType]
    INDEX_RULE_DROP: _ClassVar[ActionType]
ACTION_TYPE_UNSPECIFIED: ActionType
CATALOG_CREATE: ActionType
CATALOG_ROLLBACK: ActionType
CATALOG_EXPORT: ActionType
NAMESPACE_CREATE: ActionType
NAMESPACE_ALTER: ActionType
NAMESPACE_DROP: ActionType
TABLE_CREATE: ActionType
TABLE_ALTER: ActionType
TABLE_DROP: ActionType
VIEW_CREATE: ActionType
VIEW_REPLACE: ActionType
VIEW_DROP: ActionType
INDEX_RULE_CREATE: ActionType
INDEX_RULE_DROP: ActionType

class ActionDef(_message.Message):
    __slots__ = ("type", "object_type", "namespace_name", "object_name", "def_path", "previous_def_path", "if_not_exists", "rollback_to_version", "export_name", "export_root")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    OBJECT_TYPE_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_NAME_FIELD_NUMBER: _ClassVar[int]
    OBJECT_NAME_FIELD_NUMBER: _ClassVar[int]
    DEF_PATH_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_DEF_PATH_FIELD_NUMBER: _ClassVar[int]
    IF_NOT_EXISTS_FIELD_NUMBER: _ClassVar[int]
    ROLLBACK_TO_VERSION_FIELD_NUMBER: _ClassVar[int]
    EXPORT_NAME_FIELD_NUMBER: _ClassVar[int]
    EXPORT_ROOT_FIELD_NUMBER: _ClassVar[int]
    type: ActionType
    object_type: _objects_pb2.ObjectType
    namespace_name: str
    object_name: str
    def_path: str
    previous_def_path: str
    if_not_exists: bool
    rollback_to_version: int
    export_name: str
    export_root: str
    def __init__(self, type: _Optional[_Union[ActionType, str]] = ..., object_type: _Optional[_Union[_objects_pb2.ObjectType, str]] = ..., namespace_name: _Optional[str] = ..., object_name: _Optional[str] = ..., def_path: _Optional[str] = ..., previous_def_path: _Optional[str] = ..., if_not_exists: bool = ..., rollback_to_version: _Optional[int] = ..., export_name: _Optional[str] = ..., export_root: _Optional[str] = ...) -> None: ...
