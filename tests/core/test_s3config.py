"""S3Config: one object for the lake's S3 store, Spark's executors and Dagster; secrets never
show in its repr, and an explicit config reaches moto's server without any AWS_* variable."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lake_core import Lake, LakeConfig
from lake_core.errors import UsageError
from lake_core.loading import load
from lake_core.stores import S3Config, open_store
from lake_core.stores.s3 import S3ObjectStore
from lake_spark.session import SparkSettings, session_conf

SECRET = "wJalrXUtnFEMI-not-a-real-secret"
TOKEN = "FwoGZXIvYXdzE-not-a-real-token"


def test_repr_and_str_hide_secrets() -> None:
    cfg = S3Config(
        endpoint_url="http://127.0.0.1:9000",
        access_key_id="AKIDEXAMPLE",
        secret_access_key=SECRET,
        session_token=TOKEN,
    )
    for text in (repr(cfg), str(cfg), repr(LakeConfig(uri="s3://b/l", s3=cfg))):
        assert SECRET not in text and TOKEN not in text
        assert "secret_access_key=***" in text and "http://127.0.0.1:9000" in text
    assert repr(S3Config()) == "S3Config(addressing_style='auto')"


def test_from_env_and_to_env_round_trip() -> None:
    env = {
        "AWS_ENDPOINT_URL": "http://e:1",
        "AWS_DEFAULT_REGION": "eu-west-1",
        "AWS_ACCESS_KEY_ID": "k",
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "LAKE_S3_ADDRESSING_STYLE": "path",
    }
    cfg = S3Config.from_env(env)
    assert (cfg.endpoint_url, cfg.region, cfg.addressing_style) == (
        "http://e:1",
        "eu-west-1",
        "path",
    )
    assert S3Config.from_env(cfg.to_env()) == cfg
    assert (
        S3Config.from_env(
            {"AWS_ENDPOINT_URL_S3": "http://s3:2", "AWS_ENDPOINT_URL": "x"}
        ).endpoint_url
        == "http://s3:2"
    )
    with pytest.raises(UsageError, match="addressing style"):
        S3Config.from_env({"LAKE_S3_ADDRESSING_STYLE": "sideways"})


def test_spark_executors_get_the_config() -> None:
    cfg = S3Config(endpoint_url="http://e:1", secret_access_key=SECRET, addressing_style="path")
    conf = session_conf(SparkSettings(master="local[1]", s3=cfg), env={})
    assert conf["spark.executorEnv.AWS_ENDPOINT_URL"] == "http://e:1"
    assert conf["spark.executorEnv.AWS_SECRET_ACCESS_KEY"] == SECRET
    assert conf["spark.executorEnv.LAKE_S3_ADDRESSING_STYLE"] == "path"
    assert SECRET not in repr(SparkSettings(s3=cfg))


@pytest.mark.parametrize("style", ["path", "auto"])
def test_an_explicit_config_reaches_s3_without_aws_variables(
    s3_endpoint: str, s3_bucket: str, monkeypatch: pytest.MonkeyPatch, style: str
) -> None:
    cfg = S3Config(
        endpoint_url=s3_endpoint,
        region="us-east-1",
        access_key_id="testing",
        secret_access_key="testing-secret",
        addressing_style=style,  # type: ignore[arg-type]
    )
    for var in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    uri = f"s3://{s3_bucket}/lake"
    store = open_store(uri, s3=cfg)
    assert isinstance(store, S3ObjectStore) and store.config == cfg
    lake = Lake.init(LakeConfig(uri=uri, s3=cfg))
    pool = lake.create_pool("p", "ts:asc")
    load(pool, [pa.table({"ts": [3, 1, 2]})])
    again = Lake.open(LakeConfig(uri=uri, s3=cfg)).pool("p")
    assert again.read()["ts"].to_pylist() == [1, 2, 3]
    # Arrow's filesystem uses the same config's credentials and endpoint.
    assert again.dataset().to_table().num_rows == 3


def _executor_config(conf: dict[str, str], inherited: dict[str, str]) -> S3Config:
    """The config a task rebuilds (``S3Config.from_env``) in an executor whose environment is
    the inherited one (local mode: the driver's) overlaid with ``spark.executorEnv.*``."""
    prefix = "spark.executorEnv."
    env = {**inherited, **{k[len(prefix) :]: v for k, v in conf.items() if k.startswith(prefix)}}
    return S3Config.from_env(env)


@pytest.mark.parametrize(
    "cfg",
    [
        S3Config(access_key_id="AKIDCONFIG", secret_access_key=SECRET),
        S3Config(access_key_id="AKIDCONFIG", secret_access_key=SECRET, session_token=TOKEN),
        S3Config(endpoint_url="http://config:1", region="eu-west-1", addressing_style="path"),
    ],
    ids=["keys-no-token", "keys-and-token", "endpoint-region"],
)
def test_executors_use_exactly_the_config_not_the_drivers_other_credentials(
    cfg: S3Config,
) -> None:
    """A config with its own keys and no token must not pick up the driver's
    AWS_SESSION_TOKEN (that pairs one identity's keys with another's token), nor an endpoint
    or region the driver's environment names under another variable."""
    driver = {
        "AWS_ACCESS_KEY_ID": "AKIDDRIVER",
        "AWS_SECRET_ACCESS_KEY": "driver-secret",
        "AWS_SESSION_TOKEN": "driver-token",
        "AWS_ENDPOINT_URL_S3": "http://driver:2",
        "AWS_DEFAULT_REGION": "us-west-2",
    }
    conf = session_conf(SparkSettings(master="local[1]", s3=cfg), env=driver)
    seen = _executor_config(conf, driver)
    if cfg.access_key_id is not None:
        assert (seen.access_key_id, seen.secret_access_key, seen.session_token) == (
            cfg.access_key_id,
            cfg.secret_access_key,
            cfg.session_token,
        )
        assert conf["spark.executorEnv.AWS_SESSION_TOKEN"] == (cfg.session_token or "")
    else:  # no keys in the config: the driver's identity, whole, on both sides
        assert (seen.access_key_id, seen.session_token) == ("AKIDDRIVER", "driver-token")
    if cfg.endpoint_url is not None:
        assert (seen.endpoint_url, seen.region) == (cfg.endpoint_url, cfg.region)
        assert seen.addressing_style == "path"
    # A cluster executor inherits nothing from the driver: it sees the same config.
    assert _executor_config(conf, {}) == seen


def test_an_endpoint_that_is_not_a_url_is_a_usage_error_without_secrets() -> None:
    """boto3 raises a bare ValueError for it; the CLI would print a traceback."""
    config = S3Config(endpoint_url="notaurl", access_key_id="AK", secret_access_key="SECRET-42")
    with pytest.raises(UsageError, match="Invalid endpoint: notaurl") as err:
        config.client()
    assert "SECRET-42" not in str(err.value)


@pytest.mark.parametrize(
    ("uri", "use"),
    [
        (f"s3://AKIAEXAMPLE:{SECRET}@bucket/lake", "s3://bucket/lake"),
        # AWS secrets may hold "/": the bucket part then ends inside the secret.
        ("s3://AKIAEXAMPLE:wJalr/XUtn+FEMI@bucket/lake", "s3://bucket/lake"),
        ("s3://AKIAEXAMPLE@bucket", "s3://bucket"),
        # An "@" in the prefix as well: which "@" ends the user info is ambiguous (a secret
        # might hold one), so a placeholder rather than a wrong or leaking suggestion.
        (f"s3://AKIAEXAMPLE:{SECRET}@bucket/team@example/lake", "s3://BUCKET/PREFIX"),
        # An "@" in the secret: the first and last "@" disagree, so only a placeholder.
        ("s3://AKIAEXAMPLE:wJalr@XUtn+FEMI@bucket/lake", "s3://BUCKET/PREFIX"),
    ],
)
def test_credentials_in_an_s3_uri_are_a_usage_error_that_hides_them(uri: str, use: str) -> None:
    """Left to boto3 the user info becomes part of the bucket name (a raw
    ParamValidationError); refused before any client is built, the secret never shown."""
    for opening in (
        lambda: open_store(uri),
        lambda: S3ObjectStore.from_uri(uri),
        lambda: LakeConfig.resolve(env={"LAKE_ROOT": uri}),
        lambda: Lake.open(uri),
    ):
        with pytest.raises(UsageError) as err:
            opening()
        text = str(err.value)
        assert text.startswith("credentials do not belong in an s3:// URL: use " + use)
        assert "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY" in text
        for part in (SECRET, "wJalr", "XUtn", "FEMI"):
            assert part not in text


def test_an_at_sign_in_the_prefix_is_not_taken_for_credentials() -> None:
    store = open_store("s3://bucket/team@example/lake")
    assert isinstance(store, S3ObjectStore)
    assert (store.bucket, store.prefix) == ("bucket", "team@example/lake")


def test_an_endpoint_that_is_not_s3_is_named_and_never_reads_as_a_missing_lake(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A web server at the endpoint answers a GET with a bare 404 (no S3 error code): that is
    not "lake not found". An endpoint nobody listens on is named in the error. Neither message
    shows a secret or the user info someone put in the endpoint URL. (A real HTTP server on
    port 0, not S3; and a port just released, where nothing listens.)"""
    import http.server
    import socket
    import threading

    from lake_core.errors import ObjectNotFoundError, ObjectStoreError

    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        config = S3Config(
            endpoint_url=f"http://AKID:{SECRET}@127.0.0.1:{port}",
            region="us-east-1",
            access_key_id="AKID",
            secret_access_key=SECRET,
            addressing_style="path",
        )
        store = S3ObjectStore.from_uri("s3://bucket/lake", config=config)
        with pytest.raises(ObjectStoreError) as err:
            store.get("lake.json")
        assert not isinstance(err.value, ObjectNotFoundError)
        message = str(err.value)
        assert f"the endpoint http://127.0.0.1:{port} answered HTTP 404 without an S3 error" in (
            message
        )
        assert SECRET not in message and "AKID" not in message
    finally:
        server.shutdown()
        server.server_close()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    config = S3Config(
        endpoint_url=f"http://127.0.0.1:{closed}",
        region="us-east-1",
        access_key_id="AKID",
        secret_access_key=SECRET,
    )
    store = S3ObjectStore.from_uri("s3://bucket/lake", config=config)
    with pytest.raises(ObjectStoreError, match=rf"S3 request to http://127.0.0.1:{closed} failed"):
        store.get("lake.json")
    # A port no socket can have: botocore takes the URL, the request fails; the message
    # names it as written (urllib refuses to parse such a port).
    bad = S3Config(
        endpoint_url="http://127.0.0.1:99999", access_key_id="AKID", secret_access_key=SECRET
    )
    store = S3ObjectStore.from_uri("s3://bucket/lake", config=bad)
    with pytest.raises(ObjectStoreError, match=r"S3 request to http://127.0.0.1:99999 failed"):
        store.get("lake.json")
