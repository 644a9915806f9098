"""The command line of ``pgoutput-codec``: its arguments, and each command run from them."""

from __future__ import annotations

import argparse
import json
import os
import sys

from .. import __version__
from ..archive import ArchiveError
from ..data import sample_archive_path
from ..pgoutput.messages import format_lsn
from ..packenv import ENV_NAME, pack_environment
from ..selection import commit_window
from ..typecatalog.catalog import read_catalog
from .bench import run_bench
from .capture import capture
from .catalog import write_server_catalog
from .decode import decode_archive
from .console import PROG, CliError, first_line
from .inspect import format_inspect, inspect_archive
from .opengauss import decode_archive as og_decode
from .opengauss import inspect_archive as og_inspect
from .output import decode_output, refuse_overwrite
from .transcode import transcode_files

__all__ = ["main", "build_parser", "MODES", "ENVELOPES"]

MODES = ("FAILFAST", "PERMISSIVE", "DROPMALFORMED")
ENVELOPES = ("auto", "none", "xlogdata")


class _Parser(argparse.ArgumentParser):
    """Argument errors as one line (the usage is one ``--help`` away)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """The command's arguments: one subcommand each for capture, catalog, decode, transcode, inspect, mirror,
    pack, bench."""
    p = _Parser(prog=PROG, description="Capture, decode and inspect archived PostgreSQL pgoutput replication "
                                       "streams (no Spark needed).")
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    c = sub.add_parser("capture", help="land a live server's slot into a Parquet archive",
                       description="Poll a pgoutput slot (pg_logical_slot_peek_binary_changes) and write "
                                   "complete transactions to rolling Parquet files in DIR; the slot is "
                                   "advanced only after each file is durably written (fsync + rename). "
                                   "At-least-once and resumable: rerun the same command to continue.")
    c.add_argument("--dsn", default="", help="libpq connection string or URL; without it, libpq's environment "
                                             "(PGHOST, PGPORT, PGUSER, PGDATABASE, PGSERVICE, PGPASSFILE), "
                                             "so no password need appear in the process list")
    c.add_argument("--slot", required=True, help="logical replication slot (plugin pgoutput)")
    c.add_argument("--publication", required=True, help="publication name(s), comma-separated")
    c.add_argument("--out", required=True, metavar="DIR", help="archive directory (created; resumed if it exists)")
    c.add_argument("--proto", type=int, default=1, choices=(1, 2, 3, 4), help="pgoutput proto_version (default 1)")
    c.add_argument("--binary", action="store_true", help="binary column values")
    c.add_argument("--streaming", action="store_true", help="stream large in-progress transactions (proto >= 2)")
    c.add_argument("--messages", action="store_true", help="include logical decoding messages (pg_logical_emit_message)")
    c.add_argument("--create-slot", action="store_true", help="create the slot if it does not exist")
    c.add_argument("--two-phase", action="store_true", help="decode prepared transactions (proto >= 3; slot created with two_phase)")
    c.add_argument("--snapshot", action="store_true",
                   help="complete tables: with --create-slot, copy every published table at the slot's "
                        "consistent point before the stream; on an existing slot, copy them while the "
                        "stream runs (watermarked chunks)")
    c.add_argument("--snapshot-tables", metavar="LIST",
                   help="copy these published tables (comma-separated, table or schema.table) while the "
                        "stream runs, --rows-per-file rows a chunk")
    c.add_argument("--chunk-rows", type=int, default=0, metavar="N",
                   help="rows of a chunk copied while the stream runs (default: --rows-per-file)")
    c.add_argument("--jobs", type=int, default=0, metavar="N",
                   help="connections copying tables at once for --snapshot (default: one per core, at "
                        "most one per table)")
    c.add_argument("--max-files", type=int, default=0, metavar="N", help="stop after writing N files (0: no limit)")
    c.add_argument("--rows-per-file", type=int, default=10000, metavar="N",
                   help="rows peeked per poll, i.e. the size of a file (default 10000; grows while a "
                        "transaction does not fit)")
    c.add_argument("--poll-interval", type=float, default=1.0, metavar="S", help="seconds between empty polls (default 1)")
    c.add_argument("--stop-after", type=int, default=0, metavar="N",
                   help="stop after N consecutive polls found nothing new (0: run until interrupted)")

    g = sub.add_parser("catalog", help="write a live server's type catalog to a file",
                       description="Read what decoding needs of every type the tables of a publication (or "
                                   "every user table) use, transitively (enums, composites, domains, ranges, "
                                   "multiranges, arrays, extension types), and write it as a catalog file: "
                                   "--catalog FILE of decode and mirror types an archive captured without "
                                   "one with it. Archives written by capture carry their own.")
    g.add_argument("--dsn", default="", help="libpq connection string or URL (default: libpq's environment)")
    g.add_argument("--publication", metavar="NAMES",
                   help="publication name(s), comma-separated (default: every user table)")
    g.add_argument("--out", required=True, metavar="FILE", help="the catalog file to write (JSON)")

    d = sub.add_parser("decode", help="decode an archive to Parquet (local, no Spark)",
                       description="Decode a Parquet archive (file or directory, in seq order) or a CSV/COPY "
                                   "export of pg_logical_slot_get_binary_changes to Parquet: one row per "
                                   "message (default) or one row per committed row change (--changes). "
                                   "--source opengauss: openGauss/GaussDB frames, one row per record.")
    d.add_argument("archive", nargs="?", metavar="ARCHIVE", help="archive file or directory")
    d.add_argument("out", metavar="OUT", help="output Parquet file (or an existing directory)")
    d.add_argument("--sample", action="store_true", help="use the sample archive shipped with the package as ARCHIVE")
    d.add_argument("--changes", action="store_true", help="committed row changes (ChangeDecoder) instead of messages")
    d.add_argument("--tables", metavar="LIST", help="with --changes: tables to keep, e.g. 'public.t1,*.t3,s.*'")
    d.add_argument("--after-lsn", metavar="LSN",
                   help="with --changes: only transactions committed after LSN (X/Y or decimal): an incremental run")
    d.add_argument("--until-lsn", metavar="LSN",
                   help="with --changes: only transactions committed up to LSN (X/Y or decimal), inclusive")
    d.add_argument("--checkpoint", metavar="FILE",
                   help="with --changes: resume from FILE if it exists (only the rows from its seq on are "
                        "read, nothing given twice) and write the next run's checkpoint there")
    d.add_argument("--replays", default="drop", choices=("drop", "keep"),
                   help="with --changes: a transaction received twice (its commit LSN again) is given once "
                        "(drop, default; a commit LSN below an earlier one otherwise stops the run: the archive "
                        "is out of order) or every commit as it comes (keep: an archive across a timeline switch)")
    d.add_argument("--mode", default="FAILFAST", type=str.upper, choices=MODES,
                   help="malformed payloads: FAILFAST (stop, default), PERMISSIVE (keep error rows), "
                        "DROPMALFORMED (drop them)")
    d.add_argument("--envelope", default="auto", choices=ENVELOPES,
                   help="replication envelope of the payloads ('w' XLogData / 'k' keepalive): auto, none, xlogdata")
    d.add_argument("--payload", default="data", help="payload column name (default data)")
    d.add_argument("--encoding", metavar="ENC",
                   help="the client encoding the archive was captured under, when not UTF-8 (LATIN1, "
                        "WIN1252, ...): names and text are read from it (see 'transcode')")
    _jobs_argument(d)
    _catalog_argument(d)
    _source_arguments(d)
    d.add_argument("--keys", metavar="LIST",
                   help="--source opengauss with --changes: keys of tables whose records never name them, "
                        "e.g. 'public.t(id), sales.orders(region, id)'")

    t = sub.add_parser("transcode", help="rewrite an archive captured in another client encoding as UTF-8",
                       description="PostgreSQL sends names and text in the capturing session's client_encoding "
                                   "(by default the database's). Rewrite an archive captured under ENC (LATIN1, "
                                   "WIN1252, EUC_JP, ... or a Python codec name) as a UTF-8 session receives it, "
                                   "byte for byte: one Parquet file in OUT per archive file.")
    t.add_argument("archive", metavar="ARCHIVE", help="archive file or directory")
    t.add_argument("out", metavar="OUT", help="output directory (created)")
    t.add_argument("--encoding", required=True, metavar="ENC", help="the client encoding of the capture")
    t.add_argument("--errors", default="strict", choices=("strict", "keep"),
                   help="a payload that does not decode, or text that is not ENC: stop (strict, default) "
                        "or leave it as sent (keep; the decoders then report it)")
    t.add_argument("--payload", default="data", help="payload column name (default data)")
    t.add_argument("--envelope", default="auto", choices=ENVELOPES,
                   help="replication envelope of the payloads ('w' XLogData / 'k' keepalive): auto, none, xlogdata")

    i = sub.add_parser("inspect", help="what an archive holds, as a table",
                       description="Counts by message type and by table, LSN/xid/commit-time ranges, "
                                   "protocol features seen, errors.")
    i.add_argument("archive", nargs="?", metavar="ARCHIVE", help="archive file or directory")
    i.add_argument("--sample", action="store_true", help="inspect the sample archive shipped with the package")
    i.add_argument("--payload", default="data", help="payload column name (default data)")
    i.add_argument("--json", action="store_true", help="print JSON instead of the table")
    _source_arguments(i)
    i.add_argument("--envelope", default="auto", choices=ENVELOPES,
                   help="replication envelope of the payloads ('w' XLogData / 'k' keepalive): auto, none, xlogdata")
    i.add_argument("--encoding", metavar="ENC",
                   help="the client encoding the archive was captured under, when not UTF-8 (see 'transcode')")
    _jobs_argument(i)

    m = sub.add_parser("mirror", help="keep a Delta Lake copy of every table current from an archive",
                       description="One Delta table per source table under TARGET (deltalake, no JVM), brought "
                                   "current by one MERGE per table per run, exactly once: run it after each "
                                   "capture; a run over what was applied already writes nothing.")
    m.add_argument("archive", metavar="ARCHIVE", help="archive file or directory")
    m.add_argument("target", metavar="TARGET", help="directory of the Delta tables (created)")
    m.add_argument("--tables", metavar="LIST", help="tables to keep, e.g. 'public.t1,*.t3,s.*'")
    m.add_argument("--workers", type=_threads("--workers"), default=None, metavar="N",
                   help="threads decoding the archive and writing copies at once (default: 2, or 1 on one core)")
    _catalog_argument(m)

    k = sub.add_parser("pack", help="pack pgoutput_codec and its dependencies for Spark executors",
                       description="Writes an archive of a Python environment that imports pgoutput_codec "
                                   "(this one's versions, compiled extensions included), for executors that do "
                                   "not have it: spark-submit --archives ARCHIVE#environment --conf "
                                   "spark.sql.execution.pyspark.python=./environment/bin/python "
                                   "(docs/cluster.md). The nodes need CPython of this minor version.")
    k.add_argument("-o", "--out", metavar="ARCHIVE",
                   help="the archive to write (.tar.gz or .tgz); default: one in ~/.cache/pgoutput_codec, "
                        "reused while nothing in it changed")
    k.add_argument("--python-prefix", metavar="DIR",
                   help="where the executors' CPython is installed (/usr for /usr/bin/python3.X); "
                        "default: this interpreter's")

    b = sub.add_parser("bench", help="run the benchmarks of bench/ and print their tables",
                       description="Runs bench/decode_bench.py and the other bench/*_bench.py scripts "
                                   "(from a source checkout).")
    b.add_argument("names", nargs="*", metavar="NAME", help="only these (e.g. decode changes)")
    b.add_argument("--quick", action="store_true", help="small sizes, results not saved (a smoke run)")
    return p


def _source_arguments(p):
    p.add_argument("--source", default="pgoutput", choices=("pgoutput", "opengauss"),
                   help="what the payloads are: pgoutput messages (default) or openGauss/GaussDB "
                        "parallel-decoding frames")
    p.add_argument("--style", default="b", choices=("b", "t", "j"),
                   help="--source opengauss: the decoding-style of the frames (binary, text, json; default b)")


def _catalog_argument(p):
    p.add_argument("--catalog", metavar="FILE",
                   help="a type catalog file ('catalog' command) typing the archive's user-defined and "
                        "extension types, for an archive captured without one; its types win over the "
                        "archive's own")


def _threads(flag: str):
    """The argparse type of ``flag``: a positive number of threads."""
    def parse(text):
        try:
            n = int(text)
        except ValueError:
            n = 0
        if n < 1:
            raise argparse.ArgumentTypeError(f"{flag} takes a positive number of threads, not {text!r}")
        return n
    return parse


def _jobs_argument(p):
    p.add_argument("--jobs", "-j", type=_threads("--jobs"), default=None, metavar="N",
                   help="threads decoding at once (default: as many as a batch's size pays for; pgoutput payloads)")


def _resolve_archive(args):
    if args.sample:
        if args.archive is not None:
            raise CliError("give either ARCHIVE or --sample, not both")
        if args.source != "pgoutput":
            raise CliError("the sample archive holds pgoutput payloads: --sample takes no --source opengauss")
        path = sample_archive_path()
        if not os.path.exists(path):
            raise CliError(f"sample archive missing from the installation ({path})")
        return path
    if args.archive is None:
        raise CliError("ARCHIVE is required (or --sample)")
    return args.archive


def _run(args) -> int:
    if args.command == "capture":
        for k in ("max_files", "rows_per_file", "stop_after"):
            if getattr(args, k) < 0 or (k == "rows_per_file" and args.rows_per_file < 1):
                raise CliError(f"--{k.replace('_', '-')} must be positive")
        for k in ("jobs", "chunk_rows"):
            if getattr(args, k) < 0:
                raise CliError(f"--{k.replace('_', '-')} must be positive")
        st = capture(args.dsn, args.slot, args.publication, args.out, proto=args.proto, binary=args.binary,
                     streaming=args.streaming, messages=args.messages, two_phase=args.two_phase,
                     create_slot=args.create_slot, snapshot=args.snapshot, snapshot_tables=args.snapshot_tables,
                     jobs=args.jobs, chunk_rows=args.chunk_rows or None, max_files=args.max_files, poll_interval=args.poll_interval,
                     stop_after=args.stop_after, rows_per_file=args.rows_per_file)
        copied = f", {st['copied_rows']} rows copied" if st["copied_rows"] else ""
        print(f"captured {st['messages']} messages in {st['files']} files ({st['polls']} polls{copied}) "
              f"into {args.out}")
        return 0
    if args.command == "catalog":
        r = write_server_catalog(args.dsn, args.out, args.publication)
        print(f"{r['types']} types at LSN {format_lsn(r['lsn'])} -> {r['out']}")
        return 0
    if args.command == "decode":
        archive = _resolve_archive(args)
        for flag in ("tables", "after_lsn", "until_lsn", "checkpoint"):
            if getattr(args, flag) and not args.changes:
                raise CliError(f"--{flag.replace('_', '-')} needs --changes")
        if args.replays != "drop" and not args.changes:
            raise CliError("--replays needs --changes")
        if args.encoding and args.source != "pgoutput":
            raise CliError("--encoding is for pgoutput archives")
        if args.source == "opengauss":
            if args.checkpoint:
                raise CliError("--checkpoint is for pgoutput archives (an openGauss run passes --after-lsn)")
            if args.keys and not args.changes:
                raise CliError("--keys needs --changes")
        elif args.keys or args.style != "b":
            raise CliError(f"--{'keys' if args.keys else 'style'} needs --source opengauss")
        if args.catalog and args.source != "pgoutput":
            raise CliError("--catalog is for pgoutput archives")
        try:
            commit_window(args.after_lsn, args.until_lsn)
        except ValueError as e:
            raise CliError(f"--after-lsn/--until-lsn: {e}") from None
        default = "changes.parquet" if args.changes else \
            "messages.parquet" if args.source == "pgoutput" else "records.parquet"
        target = decode_output(args.out, default)
        refuse_overwrite({"ARCHIVE": archive}, {"OUT": target, "the errors file": target + ".errors.parquet",
                                                "--checkpoint": args.checkpoint})
        if args.source == "opengauss":
            c = og_decode(archive, args.out, style=args.style, changes=args.changes, tables=args.tables,
                          keys=args.keys, mode=args.mode, envelope=args.envelope, payload=args.payload,
                          after_lsn=args.after_lsn, until_lsn=args.until_lsn, replays=args.replays,
                          jobs=args.jobs)
        else:
            c = decode_archive(archive, args.out, changes=args.changes, tables=args.tables, mode=args.mode,
                               envelope=args.envelope, payload=args.payload, after_lsn=args.after_lsn,
                               until_lsn=args.until_lsn, checkpoint=args.checkpoint, replays=args.replays,
                               encoding=args.encoding, jobs=args.jobs, catalog=args.catalog)
        what = "change rows" if args.changes else "message rows" if args.source == "pgoutput" else "record rows"
        print(f"rows in: {c['rows_in']}  rows decoded: {c['rows_decoded']}  rows in error: {c['rows_in_error']}  "
              f"{what} written: {c['rows_out']} -> {c['out']}")
        if c.get("open_transactions"):
            print(f"{c['open_transactions']} transaction(s) still open at the end of the archive (not emitted)")
        if c.get("replayed_transactions"):
            print(f"{c['replayed_transactions']} transaction(s) received again (a reconnect replayed them): "
                  "given once")
        if c.get("heartbeats"):
            print(f"{c['heartbeats']} heartbeat record(s) skipped")
        if c.get("errors_file"):
            print(f"error rows listed in {c['errors_file']}")
        if c.get("checkpoint"):
            print(f"checkpoint -> {c['checkpoint']}: the next run reads from seq {c['next_from_seq']}"
                  + (f" (held by {c['held_by']} open transaction(s))" if c["held_by"] else "")
                  + (f"; {c['files_skipped']} file(s) before this run's checkpoint not read" if c["files_skipped"]
                     else ""))
        return 0
    if args.command == "transcode":
        refuse_overwrite({"ARCHIVE": args.archive}, {"OUT": args.out})
        c = transcode_files(args.archive, args.out, encoding=args.encoding, errors=args.errors,
                            payload=args.payload, envelope=args.envelope)
        print(f"rows: {c['rows']}  rewritten: {c['rewritten']}  left as sent: {c['left_as_sent']}  "
              f"files: {c['files']} -> {c['out']}")
        return 0
    if args.command == "inspect":
        archive = _resolve_archive(args)
        if args.encoding and args.source != "pgoutput":
            raise CliError("--encoding is for pgoutput archives")
        if args.source == "opengauss":
            r = og_inspect(archive, style=args.style, envelope=args.envelope, payload=args.payload)
        elif args.style != "b":
            raise CliError("--style needs --source opengauss")
        else:
            r = inspect_archive(archive, payload=args.payload, envelope=args.envelope, encoding=args.encoding,
                                jobs=args.jobs)
        print(json.dumps(r, default=str, indent=1) if args.json else format_inspect(r))
        return 0
    if args.command == "mirror":
        import warnings

        from .. import lake
        from ..tables import IncompleteTableWarning
        refuse_overwrite({"ARCHIVE": args.archive}, {"TARGET": args.target})
        registry = None
        if args.catalog:
            try:
                registry = read_catalog(args.catalog).registry()
            except ValueError as e:
                raise CliError(f"--catalog {first_line(e)}") from None
        said: list = []
        ours = (lake.MirrorWarning, IncompleteTableWarning)
        try:
            with warnings.catch_warnings(record=True) as said:
                for kind in ours:
                    warnings.simplefilter("always", kind)
                runs = lake.mirror(args.archive, args.target, tables=args.tables, workers=args.workers,
                                   registry=registry)
        finally:
            for w in said:
                if issubclass(w.category, ours):
                    print(f"{PROG} mirror: warning: {w.message}", file=sys.stderr)
                else:       # another library's: shown as Python's filters say
                    warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
        for r in runs:
            did = "nothing new" if r.version is None else \
                f"version {r.version}: {r.upserts} upserts, {r.deletes} deletes" + (", truncated" if r.truncated else "")
            held = format_lsn(r.commit_lsn) if r.commit_lsn is not None else "none"
            print(f"{r.table}: {did} (holds commits up to LSN {held})")
        return 0
    if args.command == "pack":
        path = pack_environment(args.out, python_prefix=args.python_prefix)
        print(f"{path} ({path.stat().st_size / 1e6:.0f} MB): spark.archives={path}#{ENV_NAME}, "
              f"spark.sql.execution.pyspark.python=./{ENV_NAME}/bin/python")
        return 0
    if args.command == "bench":
        return run_bench(args.names, args.quick)
    raise CliError("a command is required: capture, catalog, decode, transcode, inspect, mirror, pack or bench "
                   "(see --help)")


def main(argv=None) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``); returns the exit status: 0,
    1 for a failure (told in one line on stderr) or 130 when interrupted. Bad arguments exit
    with status 2 (SystemExit, from argparse)."""
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else list(argv))
    try:
        return _run(args)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1
    except Exception as e:   # one line, never a traceback: the cause is in the message
        name = type(e).__name__
        msg = first_line(e)
        if not isinstance(e, (CliError, ArchiveError)):   # these say what is wrong themselves
            msg = f"{name}: {msg}"
        print(f"{PROG} {args.command or ''}: error: {msg}".replace("  ", " "), file=sys.stderr)
        if os.environ.get("PGOUTPUT_CODEC_DEBUG"):
            raise
        return 1

