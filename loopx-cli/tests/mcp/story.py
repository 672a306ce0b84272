"""The seed story as an agent session over MCP, with the official Python client.

Started by loopx-cli/tests/mcp.rs on a store where the goal and its todos already exist. It
connects to `loopx mcp` over stdio, or to the tools' streamable HTTP router with a bearer
token, acts as agent:agent-a through the tools, and runs `loopx` itself for the parts that are
not the agent's: the validator signs each verdict (`loopx verdict`) and the maintainer answers
the gate from the CLI meanwhile. It prints one JSON line per step, for the Rust test to assert
on; any unexpected answer is an exception (a non-zero exit).

    story.py stdio LOOPX STORE GOAL
    story.py http  LOOPX STORE GOAL URL TOKEN WRONG_TOKEN
"""

import asyncio
import json
import os
import subprocess
import sys
import tempfile
from datetime import datetime, timedelta, timezone

import httpx2
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

AGENT = "agent:agent-a"
VALIDATOR = "validator:cargo-test"
REPO = "repo:acme/cli"


def report(step, **fields):
    print(json.dumps({"step": step, **fields}), flush=True)


def now():
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Story:
    def __init__(self, session, loopx, store, goal):
        self.session = session
        self.loopx = loopx
        self.store = store
        self.goal = goal
        self.scratch = tempfile.mkdtemp(prefix="loopx-mcp-story-")

    def cli(self, *args):
        """Runs `loopx --store STORE --goal GOAL ARGS`, expecting success."""
        done = subprocess.run(
            [self.loopx, "--store", self.store, "--goal", self.goal, *args],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise RuntimeError(f"loopx {args} failed ({done.returncode}): {done.stderr}")
        return done.stdout

    async def call(self, tool, **arguments):
        """A tool call that must succeed; its structured document."""
        result = await self.session.call_tool(tool, arguments)
        if result.is_error:
            raise RuntimeError(f"{tool} failed: {result.content[0].text}")
        return result.structured_content

    async def refused(self, tool, **arguments):
        """A tool call that must be a tool error; its {code, message, hint}."""
        result = await self.session.call_tool(tool, arguments)
        if not result.is_error:
            raise RuntimeError(f"{tool} was expected to fail: {result.content[0].text}")
        return json.loads(result.content[0].text)

    def signed(self, todo, turn, epoch, evidence):
        """The validator's signed verdict on a turn, as `loopx verdict` prints it."""
        args = ["--as", VALIDATOR, "verdict", "--todo", todo, "--turn", turn,
                "--epoch", str(epoch), "--outcome", "passed", "--summary", "cargo test passed"]
        for i, item in enumerate(evidence):
            path = os.path.join(self.scratch, f"{turn}-{epoch}-evidence-{i}.json")
            with open(path, "w") as f:
                json.dump(item, f)
            args += ["--evidence", path]
        return json.loads(self.cli(*args))

    def settlement(self, todo, turn, epoch, evidence, observations, continuation):
        signed = self.signed(todo, turn, epoch, evidence)
        return {
            "todo": todo,
            "epoch": epoch,
            "turn": turn,
            "verdict": signed["verdict"],
            "evidence": signed["evidence"],
            "observations": observations,
            "transition": {"kind": "complete", "continuation": {"kind": continuation}},
            "usage": {"turns": 1, "tokens": 18000, "wall_ms": 420000},
        }

    async def next_step(self, name):
        decision = (await self.call("next", goal=self.goal))["decision"]
        report(name, kind=decision["kind"], todo=decision.get("todo"),
               lease=decision.get("lease", {}).get("step"),
               outcome=decision.get("outcome"), decision=decision)
        return decision

    async def claim(self, todo):
        claimed = await self.call("claim", goal=self.goal, todo=todo, ttl=1800000)
        return claimed["lease"]["lease"]["epoch"]

    async def turn(self, todo, turn, evidence, observations, continuation="goal_still_active"):
        epoch = await self.claim(todo)
        await self.call("begin", goal=self.goal, todo=todo, epoch=epoch, turn=turn,
                        reserve={"turns": 1, "tokens": 30000})
        settled = await self.call(
            "settle", goal=self.goal,
            settlement=self.settlement(todo, turn, epoch, evidence, observations, continuation))
        report("settle", todo=todo, turn=turn, epoch=epoch, status=settled["todo"]["status"],
               replayed=settled["replayed"], revision=settled["receipt"]["revision"],
               turns_left=settled["budget"]["remaining"]["turns"])


def passing(check, revision):
    return {"id": f"{check}@{revision}", "check": check, "subject": REPO, "revision": revision,
            "outcome": "passed", "summary": "cargo test passed", "observed_at": now()}


def head(revision):
    return {"key": "git-head:acme/cli", "subject": REPO, "revision": revision,
            "fingerprint": revision.replace(":", "-"), "observed_at": now(),
            "summary": f"head at {revision}"}


async def story(story):
    s = story
    tools = await s.session.list_tools()
    report("tools", names=sorted(t.name for t in tools.tools),
           schemas=all(t.input_schema.get("type") == "object" for t in tools.tools))

    brief = await s.session.call_tool("brief", {"goal": s.goal})
    report("brief", markdown=brief.content[0].text,
           assignment=brief.structured_content is not None)

    await s.next_step("next_first")
    await s.turn("change-output-layer", "t1",
                 [passing("tests.text_output", "git:abc123"),
                  passing("tests.json_schema", "git:abc123")],
                 [head("git:abc123")])

    deadline = (datetime.now(timezone.utc) + timedelta(days=1)).isoformat().replace("+00:00", "Z")
    opened = await s.call("gate_open", goal=s.goal, gate={
        "id": "error-code-name",
        "question": "is error_code acceptable as a stable field?",
        "owner": {"kind": "person", "id": "maintainer"},
        "scope": {"todos": ["document-json"]},
        "deadline": deadline,
        "on_expiry": "keep_asking",
    })
    report("gate_open", gate=opened["gate"]["id"], effective=opened["gate"]["effective"])
    await s.next_step("next_while_gate_pending")

    # A lease given up and claimed again: the first epoch is stale from then on.
    todo = "update-help"
    first = await s.claim(todo)
    await s.call("release", goal=s.goal, todo=todo, epoch=first)
    second = await s.claim(todo)
    await s.call("begin", goal=s.goal, todo=todo, epoch=second, turn="t2",
                 reserve={"turns": 1, "tokens": 30000})
    stale = await s.refused("settle", goal=s.goal, settlement=s.settlement(
        todo, "t2", first, [], [head("git:def456")], "goal_still_active"))
    report("stale_settle", code=stale["code"], hint=stale["hint"], first=first, second=second,
           presented=stale.get("details", {}).get("presented"))
    settled = await s.call("settle", goal=s.goal, settlement=s.settlement(
        todo, "t2", second, [], [head("git:def456")], "goal_still_active"))
    report("settle", todo=todo, turn="t2", epoch=second, status=settled["todo"]["status"],
           replayed=settled["replayed"], revision=settled["receipt"]["revision"],
           turns_left=settled["budget"]["remaining"]["turns"])

    status = await s.call("status", goal=s.goal)
    stale_evidence = [e["id"] for e in status["status"]["evidence"] if e.get("freshness") != "fresh"]
    report("status_stale", stale=stale_evidence)

    # Meanwhile the maintainer answers from the CLI.
    s.cli("--as", "person:maintainer", "gate", "answer", "--gate", "error-code-name",
          "--answer", "yes, keep error_code")
    await s.next_step("next_after_answer")

    ready = await s.call("ready")
    report("ready", ready=ready["ready"], agent=ready["agent"])

    await s.turn("document-json", "t3",
                 [passing("tests.text_output", "git:def456"),
                  passing("tests.json_schema", "git:def456")],
                 [], continuation="no_follow_up")
    await s.next_step("next_terminal")

    resources = await s.session.list_resources()
    uris = sorted(r.uri for r in resources.resources)
    state = await s.session.read_resource(f"loopx://goal/{s.goal}")
    log = await s.session.read_resource(f"loopx://goal/{s.goal}/log")
    report("resources", uris=uris,
           terminal=json.loads(state.contents[0].text)["goal"]["terminal"],
           events=len(json.loads(log.contents[0].text)["events"]))


async def stdio(loopx, store, goal):
    server = StdioServerParameters(command=loopx, args=["--store", store, "mcp", "--as", AGENT])
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            await story(Story(session, loopx, store, goal))


async def http(loopx, store, goal, url, token, wrong):
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {wrong}"}) as client:
        refused = await client.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                               "params": {}},
                                    headers={"Accept": "application/json, text/event-stream"})
        report("wrong_token", status=refused.status_code, body=refused.json(),
               challenge=refused.headers.get("www-authenticate"))
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as client:
        async with streamable_http_client(url, http_client=client) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                await story(Story(session, loopx, store, goal))


def main():
    transport, loopx, store, goal, *rest = sys.argv[1:]
    if transport == "stdio":
        asyncio.run(stdio(loopx, store, goal))
    else:
        asyncio.run(http(loopx, store, goal, *rest))
    report("done")


if __name__ == "__main__":
    main()
