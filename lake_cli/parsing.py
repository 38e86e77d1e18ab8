"""click, reading the command line by argparse's rules, with ``lake``'s one-line usage errors.

The contract (shared/design/CLI.md) fixes what a usage error prints: one line
``error: <what> (see lake load --help)`` on stderr, exit status 2, naming the help of the
(sub)command that was misused. ``lake`` was first written on argparse, and scripts rely on its
reading of words too: long options by unique prefix (``--col`` is ``--columns``), ``-pPOOL``
and ``-p=POOL``, ``-1`` as a value, ``--`` ending the options, an option's value never a word
that looks like an option. :class:`LakeCommand` and :class:`LakeGroup` walk the words that way
first (:func:`_scan`), raise the same messages in the same order argparse did (bad values as
they are met, then missing required arguments, then unknown words), and hand click a
normalized list (options, then ``--``, then the positionals) that click then parses.

Invariant: every word click receives is one :func:`_scan` accepted, so click's own usage
errors (whose wording differs) never reach a user outside shell completion.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any, NoReturn

import click
from click.shell_completion import CompletionItem

if TYPE_CHECKING:
    _ParamType = click.ParamType[Any]  # generic from click 8.3 on
else:
    _ParamType = click.ParamType

#: Words that look like negative numbers are values, not options (no ``lake`` option does).
_NEGATIVE = re.compile(r"^-\d+$|^-\d*\.\d+$")
HELP_OPTIONS = ["-h", "--help"]
#: ``ctx.meta`` key of the unknown words groups met on the way down, in the order met.
_DEFERRED = "lake.unknown_words"
#: ``ctx.meta`` key (shared by every context of a run): the command being run, as typed.
COMMAND_PATH = "lake.command_path"


class CommandLineError(click.UsageError):
    """A usage error as ``lake`` prints it: one line, naming the help of the command that was
    misused (``ctx``), exit status 2."""

    exit_code = 2

    def show(self, file: IO[Any] | None = None) -> None:
        path = self.ctx.command_path if self.ctx is not None else "lake"
        (file or sys.stderr).write(f"error: {self.message} (see {path} --help)\n")


def _fail(ctx: click.Context, message: str) -> NoReturn:
    raise CommandLineError(message, ctx)


class Opt(click.Option):
    """An option whose ``required`` is checked by :func:`_scan` (argparse's message lists
    every missing one), not by click."""

    def __init__(self, param_decls: Sequence[str], *, required: bool = False, **kw: Any) -> None:
        super().__init__(param_decls, required=False, **kw)
        self.must = required

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        record = super().get_help_record(ctx)
        if record is None or not self.must:
            return record
        return record[0], f"{record[1]}  [required]"


class Arg(click.Argument):
    """A positional argument with help, its ``required`` checked by :func:`_scan`."""

    def __init__(self, param_decls: Sequence[str], *, required: bool = True, **kw: Any) -> None:
        super().__init__(param_decls, required=False, **kw)
        self.must = required

    def make_metavar(self, ctx: click.Context) -> str:
        shown = f"{self.metavar}..." if self.nargs == -1 else str(self.metavar)
        return shown if self.must else f"[{shown}]"


class Choice(_ParamType):
    """One of ``choices``; a wrong word is reported as argparse reported it."""

    name = "choice"

    def __init__(self, *choices: str) -> None:
        self.choices = choices

    def get_metavar(self, param: click.Parameter, ctx: click.Context) -> str:
        return "{" + ",".join(self.choices) + "}"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if value in self.choices:
            return value
        listed = ", ".join(repr(c) for c in self.choices)
        self.fail(f"invalid choice: {value!r} (choose from {listed})", param, ctx)

    def shell_complete(
        self, ctx: click.Context, param: click.Parameter, incomplete: str
    ) -> list[CompletionItem]:
        return [CompletionItem(c) for c in self.choices if c.startswith(incomplete)]


class Number(_ParamType):
    """``int`` or ``float`` of the word, as argparse's ``type=int``/``type=float``."""

    def __init__(self, kind: type[int] | type[float]) -> None:
        self.kind = kind
        self.name = kind.__name__

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, self.kind) and not isinstance(value, bool):
            return value
        try:
            return self.kind(value)
        except (TypeError, ValueError):
            self.fail(f"invalid {self.name} value: {value!r}", param, ctx)


class Checked(_ParamType):
    """A value ``check`` turns into what the command gets, or refuses with a message (raised
    as ``ValueError``), reported as ``argument -n: <message>``."""

    def __init__(self, check: Callable[[str], Any], name: str = "text") -> None:
        self.check = check
        self.name = name

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value
        try:
            return self.check(value)
        except ValueError as e:
            self.fail(str(e), param, ctx)


def _name(param: click.Parameter) -> str:
    """How argparse named a parameter in messages: its option strings, else its metavar."""
    if isinstance(param, click.Option):
        return "/".join(param.opts)
    return param.metavar or (param.name or "").upper()


def _takes_value(param: click.Option) -> bool:
    return not param.is_flag and not param.count


@dataclass
class _Word:
    """One command-line word as argparse classified it: a positional (``option`` None and not
    ``unknown``), a known option (with the value glued to it, if any), or an unknown option."""

    text: str
    option: str | None = None
    glued: str | None = None
    unknown: bool = False
    after_dashes: bool = False


@dataclass
class _Scan:
    options: list[str] = field(default_factory=list)
    positionals: list[tuple[Arg, list[str]]] = field(default_factory=list)
    seen: list[click.Option] = field(default_factory=list)


def _classify(ctx: click.Context, table: dict[str, click.Option], text: str) -> _Word:
    """argparse's ``_parse_optional``: positional, exact option, ``--opt=value``, unique
    prefix, ``-pVALUE``; an ambiguous prefix is an error at once."""
    if not text or text[0] != "-":
        return _Word(text)
    if text in table:
        return _Word(text, option=text)
    if len(text) == 1:
        return _Word(text)
    if "=" in text:
        head, value = text.split("=", 1)
        if head in table:
            return _Word(text, option=head, glued=value)
    matches: list[tuple[str, str | None]] = []
    if text.startswith("--"):
        prefix, _, value = text.partition("=")
        glued = value if "=" in text else None
        matches = [(o, glued) for o in table if o.startswith(prefix)]
    elif text[1] != "-":
        short, rest = text[:2], text[2:]
        for o in table:
            if o == short:
                matches.append((o, rest))
            elif o.startswith(text):
                matches.append((o, None))
    if len(matches) > 1:
        found = ", ".join(o for o, _ in matches)
        _fail(ctx, f"ambiguous option: {text} could match {found}")
    if len(matches) == 1:
        return _Word(text, option=matches[0][0], glued=matches[0][1])
    if _NEGATIVE.match(text) or " " in text:
        return _Word(text)
    return _Word(text, unknown=True)


def _words(ctx: click.Context, table: dict[str, click.Option], args: Sequence[str]) -> list[_Word]:
    words: list[_Word] = []
    dashes = False
    for text in args:
        if dashes:
            words.append(_Word(text, after_dashes=True))
        elif text == "--":
            dashes = True
            words.append(_Word(text, option="--"))
        else:
            words.append(_classify(ctx, table, text))
    return words


def _is_value(word: _Word) -> bool:
    return word.option is None and not word.unknown


class _Reader:
    """Walks the words of one command as argparse consumed them (see the module docstring)."""

    def __init__(self, command: click.Command, ctx: click.Context, strict: bool) -> None:
        self.command, self.ctx, self.strict = command, ctx, strict
        self.params = command.get_params(ctx)
        self.table = {o: p for p in self.params if isinstance(p, click.Option) for o in p.opts}
        self.exclusive: Sequence[Sequence[str]] = getattr(command, "exclusive", ())
        self.scan = _Scan()
        #: Unknown words with their place on the command line (reported in that order).
        self.unknown: list[tuple[int, str]] = []

    def fail(self, message: str) -> None:
        if self.strict:
            _fail(self.ctx, message)

    def take(self, param: click.Option, option: str, value: str | None) -> None:
        """One option met, in command-line order: help, exclusion and bad values as argparse
        reported them, at the point it met them."""
        ctx = self.ctx
        if option in HELP_OPTIONS and self.strict:
            # As argparse: help where it is met (earlier mistakes win), then exit 0.
            click.echo(ctx.get_help(), color=ctx.color)
            raise SystemExit(0)
        for group in self.exclusive:
            if option in group:
                for other in self.scan.seen:
                    if other is not param and any(o in group for o in other.opts):
                        self.fail(
                            f"argument {_name(param)}: not allowed with argument {_name(other)}"
                        )
        if value is not None:
            try:
                param.type.convert(value, param, ctx)
            except click.BadParameter as e:
                self.fail(f"argument {_name(param)}: {e.message}")
            self.scan.options += [option, value]
        else:
            self.scan.options.append(option)
        self.scan.seen.append(param)

    def options(self, words: list[_Word], stop_at_positional: bool) -> int:
        """Consume options (and, unless ``stop_at_positional``, collect positionals in runs);
        returns the index where a group's command word starts (or ``len(words)``)."""
        runs: list[list[tuple[int, str, bool]]] = [[]]
        i = 0
        while i < len(words):
            w = words[i]
            if w.option == "--" or _is_value(w):
                if stop_at_positional and w.option != "--":
                    return i
                if not stop_at_positional:
                    runs[-1].append((i, w.text, w.option == "--"))
                i += 1
                continue
            if runs[-1]:
                runs.append([])
            if w.unknown or w.option is None:
                self.unknown.append((i, w.text))
                i += 1
                continue
            i = self.option(words, i)
        if not stop_at_positional:
            self.positionals([r for r in runs if r])
        return len(words)

    def option(self, words: list[_Word], i: int) -> int:
        w = words[i]
        assert w.option is not None
        option, glued = w.option, w.glued
        param = self.table[option]
        while glued is not None:
            if _takes_value(param):
                self.take(param, option, glued)
                return i + 1
            if option[1] != "-" and glued != "":
                # A cluster of short flags, argparse-style: -qp POOL.
                self.take(param, option, None)
                following = "-" + glued[0]
                if following not in self.table:
                    self.fail(f"argument {_name(param)}: ignored explicit argument {glued!r}")
                    return i + 1
                option, glued = following, glued[1:] or None
                param = self.table[option]
                continue
            self.fail(f"argument {_name(param)}: ignored explicit argument {glued!r}")
            return i + 1
        if not _takes_value(param):
            self.take(param, option, None)
            return i + 1
        if i + 1 < len(words) and _is_value(words[i + 1]) and not words[i + 1].after_dashes:
            self.take(param, option, words[i + 1].text)
            return i + 2
        self.fail(f"argument {_name(param)}: expected one argument")
        return i + 1

    def positionals(self, runs: list[list[tuple[int, str, bool]]]) -> None:
        """Each run of positional words (``--`` included) fills the remaining positional
        parameters in order: one value (with the ``--`` around it) each, a variadic one the
        rest of the run; each drops the first ``--`` it took. What no parameter takes is
        unknown: argparse matched runs, not single words."""
        remaining = [p for p in self.params if isinstance(p, Arg)]
        for run in runs:
            while run and remaining:
                param = remaining[0]
                if param.nargs == -1:
                    if param.must and all(sep for _, _, sep in run):
                        break
                    end = len(run)
                else:
                    first = next((k for k, (_, _, sep) in enumerate(run) if not sep), None)
                    if first is None:
                        break
                    end = first + 1
                    while end < len(run) and run[end][2]:
                        end += 1
                remaining.pop(0)
                taken, run = run[:end], run[end:]
                seps = [k for k, (_, _, sep) in enumerate(taken) if sep]
                values = [t for k, (_, t, _) in enumerate(taken) if k not in seps[:1]]
                self.scan.positionals.append((param, values))
                for value in values:
                    try:
                        param.type.convert(value, param, self.ctx)
                    except click.BadParameter as e:
                        self.fail(f"argument {_name(param)}: {e.message}")
            self.unknown += [(i, t) for i, t, _ in run]

    def missing(self) -> None:
        given = {id(p) for p in self.scan.seen} | {id(p) for p, _ in self.scan.positionals}
        names = [_name(p) for p in self.params if getattr(p, "must", False) and id(p) not in given]
        if names:
            self.fail(f"the following arguments are required: {', '.join(names)}")

    def click_args(self) -> list[str]:
        """The normalized words for click: options, ``--``, positionals in parameter order."""
        values = [v for _, vs in self.scan.positionals for v in vs]
        return [*self.scan.options, "--", *values] if values else list(self.scan.options)


def _unknown_word(ctx: click.Context, word: str) -> NoReturn:
    if word.startswith("-"):
        _fail(ctx, f"unrecognized option {word}")
    _fail(ctx, f"unexpected argument {word!r}")


def _root(ctx: click.Context) -> click.Context:
    while ctx.parent is not None:
        ctx = ctx.parent
    return ctx


class LakeCommand(click.Command):
    """A ``lake`` command: argparse's reading of words and messages (module docstring),
    examples kept as written, options in ``exclusive`` groups mutually exclusive."""

    def __init__(self, *args: Any, exclusive: Sequence[Sequence[str]] = (), **kw: Any) -> None:
        kw.setdefault("context_settings", {"help_option_names": HELP_OPTIONS})
        super().__init__(*args, **kw)
        self.exclusive = exclusive

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        strict = not ctx.resilient_parsing
        reader = _Reader(self, ctx, strict)
        reader.options(_words(ctx, reader.table, args), stop_at_positional=False)
        if strict:
            reader.missing()
            # Unknown words: the groups' first (those before the command blame `lake`), then
            # this command's own, as argparse gathered them.
            for blame_root, word in _root(ctx).meta.get(_DEFERRED, []):
                _unknown_word(_root(ctx) if blame_root else ctx, word)
            if reader.unknown:
                _unknown_word(ctx, min(reader.unknown)[1])
        return super().parse_args(ctx, reader.click_args())

    def invoke(self, ctx: click.Context) -> Any:
        # The command as typed (``lake index apply``), for messages about the operation.
        ctx.meta[COMMAND_PATH] = ctx.command_path
        return super().invoke(ctx)

    def collect_usage_pieces(self, ctx: click.Context) -> list[str]:
        """``[OPTIONS]``, then the required options, then the positionals."""
        required = [
            f"{p.opts[0]} {p.make_metavar(ctx)}"
            for p in self.get_params(ctx)
            if isinstance(p, Opt) and p.must
        ]
        return [self.options_metavar or "[OPTIONS]", *required] + [
            piece
            for p in self.get_params(ctx)
            if isinstance(p, click.Argument)
            for piece in p.get_usage_pieces(ctx)
        ]

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        _write_epilog(self.epilog, formatter)


def _write_epilog(epilog: str | None, formatter: click.HelpFormatter) -> None:
    """Examples as written: click would re-flow them into one paragraph."""
    if epilog:
        formatter.write_paragraph()
        formatter.write(epilog if epilog.endswith("\n") else epilog + "\n")


class LakeGroup(click.Group):
    """A group of ``lake`` commands (``lake`` itself, ``lake catalog``): commands listed and
    named in the order they were added; a missing or unknown command word is a usage error
    worded as argparse worded it."""

    command_class = LakeCommand

    def __init__(self, *args: Any, **kw: Any) -> None:
        kw.setdefault("context_settings", {"help_option_names": HELP_OPTIONS})
        super().__init__(*args, **kw)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        strict = not ctx.resilient_parsing
        reader = _Reader(self, ctx, strict)
        words = _words(ctx, reader.table, args)
        start = reader.options(words, stop_at_positional=True)
        if strict:
            if start == len(words):
                reader.fail("the following arguments are required: COMMAND")
            name = words[start].text
            if name not in self.commands:
                listed = ", ".join(repr(c) for c in self.commands)
                before = [w for i, w in reader.unknown if i == start - 1]
                if before:  # `lake -f json ls`: a command's option put before the command
                    reader.fail(
                        f"{before[0]} is not an option of {ctx.command_path!r}: a command's "
                        f"options go after it, e.g. {ctx.command_path} COMMAND {before[0]} {name}"
                    )
                reader.fail(f"argument COMMAND: invalid choice: {name!r} (choose from {listed})")
            deferred = _root(ctx).meta.setdefault(_DEFERRED, [])
            deferred += [(ctx.parent is None, w) for _, w in sorted(reader.unknown)]
        rest = [w.text for w in words[start:]]
        return super().parse_args(ctx, [*reader.scan.options, *rest])

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        _write_epilog(self.epilog, formatter)
