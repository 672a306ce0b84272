"""The peers' durable step, timed the way the store benchmark times loopx's settle commit.

One process runs one peer on one backend and prints one JSON line:

    {"peer": ..., "backend": ..., "steps": N, "per_second": ..., "median_ms": ...,
     "bytes_per_step": ..., "rss_kib": ..., "durability": "..."}

A *step* is one unit of agent progress made durable before the next begins:

- LangGraph: one super-step of a graph whose one node loops back to itself, checkpointed with
  `durability="sync"` (the checkpoint and its pending writes are saved before the next
  super-step runs), on `SqliteSaver` or `PostgresSaver`;
- DBOS: one `@DBOS.step()` of a workflow; DBOS records the step's output in its system database
  before the workflow goes on, on SQLite or PostgreSQL.

Bytes per step are the growth of the database (SQLite: the file and its log after a checkpoint;
PostgreSQL: `pg_total_relation_size` of every table) over the timed steps. Memory is this
process's peak resident set.
"""

import argparse
import json
import os
import resource
import sqlite3
import statistics
import sys
import tempfile
import time

WARM_STEPS = 60


def peak_rss_kib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def sqlite_bytes(path):
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return sum(
        os.path.getsize(p) for p in (path, path + "-wal", path + "-journal") if os.path.exists(p)
    )


def sqlite_durability(path):
    with sqlite3.connect(path) as conn:
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    # `synchronous` is per connection; neither peer changes SQLite's default, FULL.
    return f"journal_mode={mode}, synchronous=FULL (default)"


def postgres_bytes(url):
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0)::BIGINT FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.relkind = 'r' AND n.nspname NOT IN ('pg_catalog', 'information_schema')"
        ).fetchone()
    return int(row[0])


class StepClock:
    """The time between one step's start and the next's: a step ends when its record is durable."""

    def __init__(self):
        self.times = []
        self.last = None

    def tick(self):
        now = time.perf_counter()
        if self.last is not None:
            self.times.append(now - self.last)
        self.last = now


def langgraph(backend, steps, sqlite_path, postgres_url):
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph

    clock = StepClock()
    limit = {"steps": 0}

    class Progress(TypedDict):
        done: int
        note: str

    def work(state):
        clock.tick()
        return {"done": state["done"] + 1, "note": "a bounded step proven"}

    def more(state):
        return "work" if state["done"] < limit["steps"] else END

    builder = StateGraph(Progress)
    builder.add_node("work", work)
    builder.add_edge(START, "work")
    builder.add_conditional_edges("work", more)

    def run(saver, size):
        graph = builder.compile(checkpointer=saver)

        def thread(name, count):
            limit["steps"] = count
            config = {"configurable": {"thread_id": name}, "recursion_limit": 4 * count + 10}
            graph.invoke({"done": 0, "note": ""}, config, durability="sync")

        thread("warm", WARM_STEPS)
        before = size()
        clock.times, clock.last = [], None
        # One more node run than steps: a step is the span from one node's start to the next's.
        thread("bench", steps + 1)
        return before, size()

    if backend == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = sqlite3.connect(sqlite_path, check_same_thread=False)
        saver = SqliteSaver(conn)
        saver.setup()
        before, after = run(saver, lambda: sqlite_bytes(sqlite_path))
        durability = sqlite_durability(sqlite_path)
    else:
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(postgres_url) as saver:
            saver.setup()
            before, after = run(saver, lambda: postgres_bytes(postgres_url))
        durability = "server defaults: fsync on, synchronous_commit on"
    return clock.times[:steps], (after - before) / steps, durability


def dbos(backend, steps, sqlite_path, postgres_url):
    from dbos import DBOS

    clock = StepClock()

    @DBOS.step()
    def work(n):
        clock.tick()
        return n + 1

    @DBOS.workflow()
    def progress(count):
        done = 0
        for _ in range(count):
            done = work(done)
        clock.tick()
        return done

    # SQLAlchemy, under DBOS, names the scheme `postgresql`.
    url = f"sqlite:///{sqlite_path}" if backend == "sqlite" else postgres_url.replace("postgres://", "postgresql://", 1)
    DBOS(config={"name": "loopx-peers", "system_database_url": url, "run_admin_server": False, "log_level": "WARNING"})
    DBOS.launch()
    size = (lambda: sqlite_bytes(sqlite_path)) if backend == "sqlite" else (lambda: postgres_bytes(postgres_url))
    progress(WARM_STEPS)
    before = size()
    clock.times, clock.last = [], None
    progress(steps)
    after = size()
    DBOS.destroy()
    durability = sqlite_durability(sqlite_path) if backend == "sqlite" else "server defaults: fsync on, synchronous_commit on"
    return clock.times, (after - before) / steps, durability


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("peer", choices=["langgraph", "dbos"])
    parser.add_argument("backend", choices=["sqlite", "postgres"])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--postgres-url")
    parser.add_argument("--dir", default=tempfile.gettempdir())
    args = parser.parse_args()
    if args.backend == "postgres" and not args.postgres_url:
        parser.error("--postgres-url is needed for the postgres backend")
    sqlite_path = os.path.join(args.dir, f"{args.peer}.sqlite")
    run = {"langgraph": langgraph, "dbos": dbos}[args.peer]
    times, bytes_per_step, durability = run(args.backend, args.steps, sqlite_path, args.postgres_url)
    print(
        json.dumps(
            {
                "peer": args.peer,
                "backend": args.backend,
                "steps": len(times),
                "per_second": len(times) / sum(times),
                "median_ms": statistics.median(times) * 1000.0,
                "bytes_per_step": bytes_per_step,
                "rss_kib": peak_rss_kib(),
                "durability": durability,
            }
        )
    )


if __name__ == "__main__":
    sys.exit(main())
