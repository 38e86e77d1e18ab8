"""Bad input through the CLI: exactly one ``error:`` line on stderr, the contract's exit status,
no traceback, no library noise, and nothing changed in the lake (issue 10 item 5)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from lake_cli import main
from lake_core.stores import open_store

ROOT = Path(__file__).resolve().parents[2]


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def lake_state(uri: str) -> dict[str, bytes]:
    """Every file of the lake with its bytes: equal before and after means nothing changed."""
    store = open_store(uri)
    return {info.key: store.get(info.key) for info in store.list("")}


@pytest.fixture
def loaded(lake_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert run(capsys, "--lake", lake_uri, "init")[0] == 0
    assert run(capsys, "--lake", lake_uri, "create", "p", "--orderby", "ts:asc")[0] == 0
    f = tmp_path / "rows.ndjson"
    f.write_text("".join(f'{{"ts": {i}, "v": "r{i}"}}\n' for i in range(5)))
    assert run(capsys, "--lake", lake_uri, "load", "-p", "p", str(f))[0] == 0
    return lake_uri


def one_error(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]


def _deep_json(tmp_path: Path) -> list[str]:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 3000 + "]" * 3000)
    return ["load", "-p", "p", str(deep)]


def _deep_record(tmp_path: Path) -> list[str]:
    deep = tmp_path / "deep.ndjson"
    deep.write_text('{"ts": 1, "a": ' * 3000 + "1" + "}" * 3000 + "\n")
    return ["load", "-p", "p", str(deep)]


def _zip(tmp_path: Path) -> list[str]:
    z = tmp_path / "rows.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("rows.ndjson", '{"ts": 9}\n')
    return ["load", "-p", "p", str(z)]


def _zip_no_extension(tmp_path: Path) -> list[str]:
    z = tmp_path / "rows"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("rows.ndjson", '{"ts": 9}\n')
    return ["load", "-p", "p", str(z)]


def _ndjson_as_csv(tmp_path: Path) -> list[str]:
    rows = tmp_path / "one.ndjson"
    rows.write_text('{"ts": 9, "v": "r9"}\n')
    return ["load", "-p", "p", "-i", "csv", str(rows)]


def _meta_on_load(value: str) -> Callable[[Path], list[str]]:
    def build(tmp_path: Path) -> list[str]:
        rows = tmp_path / "more.ndjson"
        rows.write_text('{"ts": 9, "v": "r9"}\n')
        return ["load", "-p", "p", str(rows), "--meta", value]

    return build


def _meta_on_delete(value: str) -> Callable[[Path], list[str]]:
    return lambda _: ["delete", "-p", "p", "--where", "ts = 1", "--meta", value]


NOT_AN_OBJECT = "--meta must be a JSON object"

CASES = {
    # name: (argv builder, exit status, text the error line must contain)
    "meta-array-load": (_meta_on_load("[1, 2]"), 2, f"{NOT_AN_OBJECT}, e.g. "),
    "meta-number-load": (_meta_on_load("3"), 2, f"{NOT_AN_OBJECT}, e.g. "),
    "meta-string-delete": (_meta_on_delete('"batch 1"'), 2, NOT_AN_OBJECT),
    "meta-null-delete": (_meta_on_delete("null"), 2, NOT_AN_OBJECT),
    "meta-nan-load": (_meta_on_load('{"ratio": NaN}'), 2, "NaN is not a JSON value"),
    "meta-overflow-load": (_meta_on_load('{"a": [1e999]}'), 2, "1e999 is beyond a float's range"),
    "ndjson-forced-as-csv": (
        _ndjson_as_csv,
        1,
        "one.ndjson, line 1: not CSV: the header is JSON; this looks like NDJSON",
    ),
    "deep-json-array": (_deep_json, 1, "nested too deeply"),
    "revert-unknown-commit": (
        lambda _: ["revert", "-p", "p", "nope"],
        1,
        "nope: commit not found (in pool p)",
    ),
    "deep-json-record": (_deep_record, 1, "nested too deeply"),
    "zip": (_zip, 2, "rows.zip: zip archives are not supported"),
    "zip-by-content": (_zip_no_extension, 2, "zip archives are not supported"),
    "900-parens-query": (
        lambda _: ["query", "-p", "p", "--where", "(" * 900 + "ts = 1" + ")" * 900],
        2,
        "nested deeper than 100 levels",
    ),
    "900-parens-delete": (
        lambda _: ["delete", "-p", "p", "--where", "(" * 900 + "ts = 1" + ")" * 900],
        2,
        "nested deeper than 100 levels",
    ),
    "deep-not": (
        lambda _: ["query", "-p", "p", "--where", "NOT " * 900 + "ts = 1"],
        2,
        "nested deeper than 100 levels",
    ),
    "absurd-grace": (
        lambda _: ["cleanup", "-p", "p", "--grace", "99999999999d"],
        2,
        "invalid duration '99999999999d'",
    ),
    "absurd-grace-seconds": (
        lambda _: ["cleanup", "-p", "p", "--grace", "99999999999999999999s"],
        2,
        "invalid duration",
    ),
    "absurd-target-size": (
        lambda _: ["create", "q", "--target-size", "99999999999999999999TB"],
        2,
        "invalid size",
    ),
    "absurd-time-west": (
        lambda _: ["query", "-p", "p", "--as-of", "9999-12-31T23:59:59-05:00"],
        2,
        "invalid time",
    ),
    "absurd-time-east": (
        lambda _: ["vacate", "-p", "p", "--before", "0001-01-01T00:00:00+05:00"],
        2,
        "invalid time",
    ),
    "infinite-lock-timeout": (
        lambda _: ["compact", "-p", "p", "--lock-timeout", "1e400"],
        2,
        "lock timeout must be between 0 and",
    ),
    "nan-lock-timeout": (
        lambda _: ["cleanup", "-p", "p", "--lock-timeout", "nan"],
        2,
        "lock timeout must be between 0 and",
    ),
    "empty-key-field": (lambda _: ["create", "q", "--orderby", "a,,b"], 2, "must not be empty"),
    "key-field-space": (lambda _: ["create", "q", "--orderby", "a b"], 2, "must not contain ' '"),
    "key-field-control": (
        lambda _: ["create", "q", "--orderby", "a\x01b:asc"],
        2,
        "must not contain '\\x01'",
    ),
    "key-field-twice": (
        lambda _: ["create", "q", "--orderby", "a,b,a"],
        2,
        "names key field 'a' twice",
    ),
    "key-field-too-long": (lambda _: ["create", "q", "--orderby", "k" * 65], 2, "at most 64"),
    "deep-meta": (
        lambda _: ["delete", "-p", "p", "--where", "ts = 1", "--meta", "[" * 3000 + "]" * 3000],
        2,
        "--meta is nested too deeply",
    ),
    "absurd-catalog-version": (
        lambda _: ["catalog", "rollback", "99999999999999999999999"],
        2,
        "catalog version 99999999999999999999999 is out of range",
    ),
    "absurd-ls-version": (
        lambda _: ["ls", "--at-version", "99999999999999999999"],
        2,
        "is out of range",
    ),
    "negative-ls-version": (
        lambda _: ["ls", "--at-version", "-1"],
        2,
        "invalid catalog version -1: versions count up from 0",
    ),
    "negative-log-count": (
        lambda _: ["catalog", "log", "-n", "-5"],
        2,
        "argument -n: must be a whole number, 0 or more, not '-5'",
    ),
    "key-order": (lambda _: ["create", "q", "--orderby", "a:sideways"], 2, "asc or desc"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_one_error_line_and_changes_nothing(
    case: str, loaded: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    build, status, text = CASES[case]
    argv = build(tmp_path)
    before = lake_state(loaded)
    try:
        code, out, err = run(capsys, "--lake", loaded, *argv)
    except SystemExit as e:  # argparse's own usage errors
        code = int(e.code or 0)
        out, err = capsys.readouterr()
    line = one_error(err)
    assert text in line, line
    assert code == status, (code, line)
    assert out == ""
    assert lake_state(loaded) == before
    # The pool still answers, with its five rows.
    code, out, _ = run(capsys, "--lake", loaded, "count", "-p", "p")
    assert (code, out) == (0, "5\n")


def test_bad_meta_is_refused_before_the_lake_is_opened(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--meta`` is checked as the command line is read: a lake that does not exist is not
    even looked for (the usage error, exit 2, not ``lake not found``)."""
    missing = str(tmp_path / "no-lake")
    for argv in (
        ["merge", "-p", "p", "dev", "--into", "main", "--meta", "[]"],
        ["revert", "-p", "p", "3MiRTddPwgm8hEjJaMfcM5UuMx2", "--meta", "1"],
        ["commit", "-p", "p", "3MiRTddPwgm8hEjJaMfcM5UuMx2", "--meta", "true"],
        ["upsert", "-p", "p", str(tmp_path / "none.ndjson"), "--meta", '"s"'],
    ):
        code, out, err = run(capsys, "--lake", missing, *argv)
        assert NOT_AN_OBJECT in one_error(err), argv
        assert (code, out) == (2, "")
    assert not (tmp_path / "no-lake").exists()


def test_meta_that_is_not_an_object_still_prints_in_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Commits whose metadata is not an object (made before ``--meta`` was checked, or by
    the Python API, which takes any JSON value) still print as they were stored."""
    from lake_core import Lake, LakeConfig
    from lake_core.loading import load

    uri = str(tmp_path / "lake")
    pool = Lake.init(LakeConfig(uri=uri)).create_pool("p", "ts:asc")
    rows = tmp_path / "rows.ndjson"
    rows.write_text('{"ts": 1}\n')
    for meta in ([1, "two"], "a note", 7):
        load(pool, [rows], meta=meta)
    code, out, _ = run(capsys, "--lake", uri, "log", "-p", "p", "-f", "json")
    assert code == 0
    assert [json.loads(line)["meta"] for line in out.splitlines()] == [7, "a note", [1, "two"]]


S3_SECRET = "wJalr/XUtnFEMI-not-a-real-secret"


@pytest.mark.parametrize("via", ["--lake", "LAKE_ROOT"])
@pytest.mark.parametrize(
    "argv",
    [["ls"], ["init"], ["query", "-p", "p", "-f", "json"], ["log", "-p", "p"], ["create", "p"]],
)
def test_credentials_in_the_lake_url_are_a_usage_error_that_never_prints_them(
    via: str, argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``s3://KEY:SECRET@bucket/lake`` failed as a raw botocore ParamValidationError: it is a
    usage error saying where credentials go, with no part of the secret on either stream."""
    uri = f"s3://AKIAEXAMPLE:{S3_SECRET}@bucket/lake"
    if via == "LAKE_ROOT":
        monkeypatch.setenv("LAKE_ROOT", uri)
        code, out, err = run(capsys, *argv)
    else:
        code, out, err = run(capsys, "--lake", uri, *argv)
    assert (code, out) == (2, "")
    assert one_error(err) == (
        "error: credentials do not belong in an s3:// URL: use s3://bucket/lake and give them "
        "in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE, ~/.aws/credentials)"
    )
    for part in (S3_SECRET, *S3_SECRET.split("/")):
        assert part not in out + err


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        (
            "s3://bucket/lake?secret=QSECRET1",
            "error: an s3:// lake URI takes no query string or fragment: use s3://bucket/lake "
            "and give settings in the environment (AWS_ENDPOINT_URL, AWS_REGION, credentials)",
        ),
        (
            "s3://bucket/lake#QSECRET1",
            "error: an s3:// lake URI takes no query string or fragment: use s3://bucket/lake "
            "and give settings in the environment (AWS_ENDPOINT_URL, AWS_REGION, credentials)",
        ),
        (
            "S3://bucket/lake",
            "error: unsupported lake URI scheme in S3://…: use a path, file://, s3:// "
            "(or http(s):// for a lake service)",
        ),
    ],
)
def test_lake_urls_it_cannot_use_are_usage_errors_that_never_echo_a_query(
    uri: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (["ls"], ["init"], ["log", "-p", "p"]):
        code, out, err = run(capsys, "--lake", uri, *argv)
        assert (code, out) == (2, "")
        assert one_error(err) == message
        assert "QSECRET1" not in out + err


def test_init_through_a_lake_service_url_says_where_a_lake_is_made(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(capsys, "--lake", "http://127.0.0.1:9/", "init")
    assert (code, out) == (2, "")
    assert one_error(err).startswith(
        "error: http://… is a lake service, which serves a lake that exists: create or open "
        "the lake where it is stored"
    )


def test_a_password_in_a_file_url_is_masked_in_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``lake not found`` and ``already exists`` name the lake by its URI: a password in it
    is shown as ``***``."""
    uri = f"file://user:hunter2secret@host{tmp_path}/lake"
    code, out, err = run(capsys, "--lake", uri, "ls")
    assert (code, out) == (1, "")
    assert one_error(err) == (
        f"error: file://user:***@host{tmp_path}/lake: lake not found (run `lake init` first)"
    )
    assert run(capsys, "--lake", uri, "init")[0] == 0
    code, out, err = run(capsys, "--lake", uri, "init")
    assert code == 1 and "already exists" in err and "user:***@host" in err
    assert "hunter2secret" not in out + err


def test_unreachable_zookeeper_is_one_error_line(tmp_path: Path) -> None:
    """kazoo logs a warning per connection attempt; the CLI prints only its own error. A real
    process, since pytest's log capture would hide the noise in-process."""
    lake = str(tmp_path / "lake")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LAKE_ROOT": lake}
    env.pop("LAKE_ZOOKEEPER", None)

    def lake_cmd(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "lake_cli", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    assert lake_cmd("init").returncode == 0
    assert lake_cmd("create", "p").returncode == 0
    before = lake_state(lake)
    # Port 1 on loopback: connection refused at once, so kazoo retries (and logs) until the
    # provider's connect timeout.
    proc = lake_cmd("--zk", "127.0.0.1:1", "compact", "-p", "p")
    line = one_error(proc.stderr)
    assert "ZooKeeper at 127.0.0.1:1 cannot be reached" in line
    assert proc.returncode == 1 and proc.stdout == ""
    assert lake_state(lake) == before


@pytest.mark.parametrize(
    ("records", "type_"),
    [
        ('{"ts": [2]}\n{"ts": [1, 2]}\n', "list<item: int64>"),
        ('{"ts": {"a": [1]}}\n', "struct<a: list<item: int64>>"),
    ],
)
def test_a_key_field_that_cannot_be_ordered_is_one_error_line(
    loaded: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], records: str, type_: str
) -> None:
    assert run(capsys, "--lake", loaded, "create", "l")[0] == 0
    f = tmp_path / "l.ndjson"
    f.write_text(records)
    before = lake_state(loaded)
    code, out, err = run(capsys, "--lake", loaded, "load", "-p", "l", str(f))
    line = one_error(err)
    assert line == (
        f"error: cannot order records by key field 'ts': it is {type_}; key fields must be "
        "numbers, strings, booleans, timestamps, dates, or structs of them"
    )
    assert (code, out) == (1, "")
    assert lake_state(loaded) == before


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        (".a", "a namespace must not be empty"),
        ("a.", "a pool name must not be empty"),
        ("ns.bad name", "a pool name must not contain ' '"),
        ("bad ns.p", "a namespace must not contain ' '"),
    ],
)
def test_a_bad_qualified_name_is_named_as_typed(
    loaded: str, name: str, reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The error names what the user typed (``'.a'``), not the empty or bad part of it."""
    before = lake_state(loaded)
    code, out, err = run(capsys, "--lake", loaded, "create", name)
    assert (code, out) == (2, "")
    assert err == f"error: invalid name {name!r}: {reason}\n"
    code, out, err = run(capsys, "--lake", loaded, "query", "-p", name)
    assert (code, out) == (2, "")
    assert err == f"error: invalid name {name!r}: {reason}\n"
    assert lake_state(loaded) == before


@pytest.mark.parametrize("fmt", ["table", "csv", "json", "parquet"])
def test_query_output_that_cannot_be_written_is_one_error_line(
    loaded: str, tmp_path: Path, fmt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``-o`` into a missing folder or onto a folder: one ``error:`` line naming the file, exit
    2 as for an input that cannot be read, no traceback, nothing written."""
    before = lake_state(loaded)
    for target, reason in (
        (tmp_path / "no" / "such" / "out", "No such file or directory"),
        (tmp_path, "Is a directory"),
    ):
        code, out, err = run(
            capsys, "--lake", loaded, "query", "-p", "p", "-f", fmt, "-o", str(target)
        )
        assert (code, out) == (2, ""), err
        assert err == f"error: cannot write {target}: {reason}\n"
    assert not (tmp_path / "no").exists()
    assert lake_state(loaded) == before


def test_a_local_store_failure_names_the_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A lake or export destination that is a file, not a folder: the one error line names
    the path that failed, not only a key relative to a root the user does not see (S3's
    errors already name s3://bucket/key)."""
    afile = tmp_path / "a.txt"
    afile.write_text("not a folder\n")
    code, out, err = run(capsys, "--lake", str(afile), "ls")
    assert (code, out) == (1, "")
    assert err == f"error: lake.json: Not a directory ({afile}/lake.json)\n"
    lake = str(tmp_path / "lake")
    assert run(capsys, "--lake", lake, "init")[0] == 0
    before = lake_state(lake)
    code, out, err = run(capsys, "--lake", lake, "catalog", "export", str(afile))
    assert (code, out) == (1, "")
    assert err.startswith("error: vn/") and err.count("\n") == 1
    assert err.endswith(f": Not a directory ({afile}/{err.split()[1].rstrip(':')})\n")
    assert lake_state(lake) == before
