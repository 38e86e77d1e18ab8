from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ObjectType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CATALOG: _ClassVar[ObjectType]
    NAMESPACE: _ClassVar[ObjectType]
    TABLE: _ClassVar[ObjectType]
    VIEW: _ClassVar[ObjectType]
    DISTRIBUTED_TRANSACTION: _ClassVar[ObjectType]
    INDEX_RULE: _ClassVar[ObjectType]

class IsolationLevel(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SNAPSHOT: _ClassVar[IsolationLevel]
    SERIALIZABLE: _ClassVar[IsolationLevel]

class KeyOrder(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    KEY_ORDER_UNSPECIFIED: _ClassVar[KeyOrder]
    KEY_ORDER_ASC: _ClassVar[KeyOrder]
    KEY_ORDER_DESC: _ClassVar[KeyOrder]

class ViewFormat(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LAKE_QUERY: _ClassVar[ViewFormat]
    SQL: _ClassVar[ViewFormat]
CATALOG: ObjectType
NAMESPACE: ObjectType
TABLE: ObjectType
VIEW: ObjectType
DISTRIBUTED_TRANSACTION: ObjectType
INDEX_RULE: ObjectType
SNAPSHOT: IsolationLevel
SERIALIZABLE: IsolationLevel
KEY_ORDER_UNSPECIFIED: KeyOrder
KEY_ORDER_ASC: KeyOrder
KEY_ORDER_DESC: KeyOrder
LAKE_QUERY: ViewFormat
SQL: ViewFormat

class CatalogDef(_message.Message):
    __slots__ = ("id", "major_version", "order", "namespace_name_max_size_bytes", "table_name_max_size_bytes", "view_name_max_size_bytes", "node_file_max_size_bytes", "properties", "txn_ttl_millis", "txn_isolation_level", "exported_snapshots", "index_rule_name_max_size_bytes", "created_at_millis")
    class PropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class ExportedSnapshotsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    MAJOR_VERSION_FIELD_NUMBER: _ClassVar[int]
    ORDER_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_NAME_MAX_SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    TABLE_NAME_MAX_SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    VIEW_NAME_MAX_SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    NODE_FILE_MAX_SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    TXN_TTL_MILLIS_FIELD_NUMBER: _ClassVar[int]
    TXN_ISOLATION_LEVEL_FIELD_NUMBER: _ClassVar[int]
    EXPORTED_SNAPSHOTS_FIELD_NUMBER: _ClassVar[int]
    INDEX_RULE_NAME_MAX_SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MILLIS_FIELD_NUMBER: _ClassVar[int]
    id: str
    major_version: int
    order: int
    namespace_name_max_size_bytes: int
    table_name_max_size_bytes: int
    view_name_max_size_bytes: int
    node_file_max_size_bytes: int
    properties: _containers.ScalarMap[str, str]
    txn_ttl_millis: int
    txn_isolation_level: IsolationLevel
    exported_snapshots: _containers.ScalarMap[str, str]
    index_rule_name_max_size_bytes: int
    created_at_millis: int
    def __init__(self, id: _Optional[str] = ..., major_version: _Optional[int] = ..., order: _Optional[int] = ..., namespace_name_max_size_bytes: _Optional[int] = ..., table_name_max_size_bytes: _Optional[int] = ..., view_name_max_size_bytes: _Optional[int] = ..., node_file_max_size_bytes: _Optional[int] = ..., properties: _Optional[_Mapping[str, str]] = ..., txn_ttl_millis: _Optional[int] = ..., txn_isolation_level: _Optional[_Union[IsolationLevel, str]] = ..., exported_snapshots: _Optional[_Mapping[str, str]] = ..., index_rule_name_max_size_bytes: _Optional[int] = ..., created_at_millis: _Optional[int] = ...) -> None: ...

class NamespaceDef(_message.Message):
    __slots__ = ("id", "properties", "created_at_millis")
    class PropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MILLIS_FIELD_NUMBER: _ClassVar[int]
    id: str
    properties: _containers.ScalarMap[str, str]
    created_at_millis: int
    def __init__(self, id: _Optional[str] = ..., properties: _Optional[_Mapping[str, str]] = ..., created_at_millis: _Optional[int] = ...) -> None: ...

class PoolLayout(_message.Message):
    __slots__ = ("kind", "options")
    class OptionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    KIND_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    kind: str
    options: _containers.ScalarMap[str, str]
    def __init__(self, kind: _Optional[str] = ..., options: _Optional[_Mapping[str, str]] = ...) -> None: ...

class TableDef(_message.Message):
    __slots__ = ("id", "key_fields", "key_order", "target_size", "seek_stride", "partition_by", "created_at_micros", "layout", "properties", "format_version")
    class PropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELDS_FIELD_NUMBER: _ClassVar[int]
    KEY_ORDER_FIELD_NUMBER: _ClassVar[int]
    TARGET_SIZE_FIELD_NUMBER: _ClassVar[int]
    SEEK_STRIDE_FIELD_NUMBER: _ClassVar[int]
    PARTITION_BY_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MICROS_FIELD_NUMBER: _ClassVar[int]
    LAYOUT_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    FORMAT_VERSION_FIELD_NUMBER: _ClassVar[int]
    id: str
    key_fields: _containers.RepeatedScalarFieldContainer[str]
    key_order: KeyOrder
    target_size: int
    seek_stride: int
    partition_by: str
    created_at_micros: int
    layout: PoolLayout
    properties: _containers.ScalarMap[str, str]
    format_version: int
    def __init__(self, id: _Optional[str] = ..., key_fields: _Optional[_Iterable[str]] = ..., key_order: _Optional[_Union[KeyOrder, str]] = ..., target_size: _Optional[int] = ..., seek_stride: _Optional[int] = ..., partition_by: _Optional[str] = ..., created_at_micros: _Optional[int] = ..., layout: _Optional[_Union[PoolLayout, _Mapping]] = ..., properties: _Optional[_Mapping[str, str]] = ..., format_version: _Optional[int] = ...) -> None: ...

class NamespaceObjectFullName(_message.Message):
    __slots__ = ("namespace_name", "name")
    NAMESPACE_NAME_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    namespace_name: str
    name: str
    def __init__(self, namespace_name: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class ViewDef(_message.Message):
    __slots__ = ("id", "view_format", "pool", "where", "columns", "referenced_object_full_names", "properties", "created_at_millis", "sql")
    class PropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    VIEW_FORMAT_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    WHERE_FIELD_NUMBER: _ClassVar[int]
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    REFERENCED_OBJECT_FULL_NAMES_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MILLIS_FIELD_NUMBER: _ClassVar[int]
    SQL_FIELD_NUMBER: _ClassVar[int]
    id: str
    view_format: ViewFormat
    pool: str
    where: str
    columns: _containers.RepeatedScalarFieldContainer[str]
    referenced_object_full_names: _containers.RepeatedCompositeFieldContainer[NamespaceObjectFullName]
    properties: _containers.ScalarMap[str, str]
    created_at_millis: int
    sql: str
    def __init__(self, id: _Optional[str] = ..., view_format: _Optional[_Union[ViewFormat, str]] = ..., pool: _Optional[str] = ..., where: _Optional[str] = ..., columns: _Optional[_Iterable[str]] = ..., referenced_object_full_names: _Optional[_Iterable[_Union[NamespaceObjectFullName, _Mapping]]] = ..., properties: _Optional[_Mapping[str, str]] = ..., created_at_millis: _Optional[int] = ..., sql: _Optional[str] = ...) -> None: ...

class IndexRuleDef(_message.Message):
    __slots__ = ("id", "kind", "fields", "properties", "created_at_millis")
    class PropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MILLIS_FIELD_NUMBER: _ClassVar[int]
    id: str
    kind: str
    fields: _containers.RepeatedScalarFieldContainer[str]
    properties: _containers.ScalarMap[str, str]
    created_at_millis: int
    def __init__(self, id: _Optional[str] = ..., kind: _Optional[str] = ..., fields: _Optional[_Iterable[str]] = ..., properties: _Optional[_Mapping[str, str]] = ..., created_at_millis: _Optional[int] = ...) -> None: ...

class DistributedTransactionDef(_message.Message):
    __slots__ = ("id", "isolation_level", "beginning_root_node_file_path", "running_root_node_file_path", "began_at_millis", "expire_at_millis")
    ID_FIELD_NUMBER: _ClassVar[int]
    ISOLATION_LEVEL_FIELD_NUMBER: _ClassVar[int]
    BEGINNING_ROOT_NODE_FILE_PATH_FIELD_NUMBER: _ClassVar[int]
    RUNNING_ROOT_NODE_FILE_PATH_FIELD_NUMBER: _ClassVar[int]
    BEGAN_AT_MILLIS_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_AT_MILLIS_FIELD_NUMBER: _ClassVar[int]
    id: str
    isolation_level: IsolationLevel
    beginning_root_node_file_path: str
    running_root_node_file_path: str
    began_at_millis: int
    expire_at_millis: int
    def __init__(self, id: _Optional[str] = ..., isolation_level: _Optional[_Union[IsolationLevel, str]] = ..., beginning_root_node_file_path: _Optional[str] = ..., running_root_node_file_path: _Optional[str] = ..., began_at_millis: _Optional[int] = ..., expire_at_millis: _Optional[int] = ...) -> None: ...
