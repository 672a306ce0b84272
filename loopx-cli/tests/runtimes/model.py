"""A scripted model on loopback for the real agent runtimes (tests/runtimes.rs).

It speaks just enough of the Anthropic Messages API (`POST /v1/messages`) and the OpenAI
Responses API (`POST /v1/responses`), streaming (SSE) or not, for Claude Code and Codex. Its
script: a turn whose last user text asks for `CALL_TOOL` calls the tool named by `TOOL` (the
first offered tool whose name ends with it) with the arguments in `TOOL_INPUT`; any other turn
says `done.`. Every request's JSON body is appended to `LOG` as one line (headers, which carry
the dummy keys, are never logged). It prints its port, then serves until killed.
"""

import json
import os
import sys
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOG = os.environ["LOG"]
TOOL = os.environ["TOOL"]
TOOL_INPUT = os.environ["TOOL_INPUT"]
MAX_BODY = 16 << 20


def text_of(content):
    """The text of a message's content, whatever its shape."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(text_of(part.get("text") or part.get("content") or "") for part in content
                         if isinstance(part, dict))
    return ""


def anthropic_wants_tool(body):
    """The tool to call, when the last message is the person's and asks for it."""
    # Hooks' context may come as messages of their own (role `system`): the turn is the
    # conversation's last message of the person or the model.
    messages = [m for m in body.get("messages") or [] if m.get("role") in ("user", "assistant")]
    if not messages or messages[-1].get("role") != "user":
        return None
    content = messages[-1].get("content")
    if isinstance(content, list) and any(p.get("type") == "tool_result" for p in content):
        return None
    if "CALL_TOOL" not in text_of(content):
        return None
    return next((t["name"] for t in body.get("tools") or [] if t.get("name", "").endswith(TOOL)), None)


def responses_wants_tool(body):
    items = body.get("input") or []
    if not isinstance(items, list) or not items:
        return None
    last = items[-1]
    if last.get("type") != "message" or last.get("role") != "user":
        return None
    if "CALL_TOOL" not in text_of(last.get("content")):
        return None
    for tool in body.get("tools") or []:
        name = tool.get("name", "")
        if name.endswith(TOOL):
            return name
        # A namespace of tools (an MCP server's) holds them under `tools`.
        for inner in tool.get("tools") or []:
            if inner.get("name", "").endswith(TOOL):
                return (tool.get("name"), inner["name"])
    return None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.reply(200, {"data": [], "models": []})

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            return self.reply(413, {"error": "too large"})
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"unparsed": len(raw)}
        with open(LOG, "a", encoding="utf-8") as log:
            log.write(json.dumps({"path": self.path, "body": body}) + "\n")
        path = self.path.split("?")[0]
        if path.endswith("/messages/count_tokens"):
            return self.reply(200, {"input_tokens": 100})
        if path.endswith("/messages"):
            return self.anthropic(body)
        if path.endswith("/responses"):
            return self.openai(body)
        return self.reply(404, {"error": "not scripted: " + path})

    def reply(self, status, value):
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def stream(self, events):
        data = b"".join(
            f"event: {name}\ndata: {json.dumps(value)}\n\n".encode() for name, value in events)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    # ----- Anthropic Messages -----

    def anthropic(self, body):
        tool = anthropic_wants_tool(body)
        if tool:
            block = {"type": "tool_use", "id": "toolu_" + uuid.uuid4().hex[:20], "name": tool,
                     "input": json.loads(TOOL_INPUT)}
            stop = "tool_use"
        else:
            block = {"type": "text", "text": "done."}
            stop = "end_turn"
        message = {"id": "msg_" + uuid.uuid4().hex[:20], "type": "message", "role": "assistant",
                   "model": body.get("model", "scripted"), "content": [], "stop_reason": None,
                   "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 1}}
        if not body.get("stream"):
            message.update(content=[block], stop_reason=stop)
            return self.reply(200, message)
        if block["type"] == "tool_use":
            start = dict(block, input={})
            delta = {"type": "input_json_delta", "partial_json": TOOL_INPUT}
        else:
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        self.stream([
            ("message_start", {"type": "message_start", "message": message}),
            ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": start}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                               "usage": {"output_tokens": 5}}),
            ("message_stop", {"type": "message_stop"}),
        ])

    # ----- OpenAI Responses -----

    def openai(self, body):
        tool = responses_wants_tool(body)
        rid = "resp_" + uuid.uuid4().hex[:20]
        if tool:
            namespace, name = tool if isinstance(tool, tuple) else (None, tool)
            item = {"type": "function_call", "id": "fc_" + uuid.uuid4().hex[:20], "status": "completed",
                    "call_id": "call_" + uuid.uuid4().hex[:20], "name": name, "arguments": TOOL_INPUT}
            if namespace:
                item["namespace"] = namespace
        else:
            item = {"type": "message", "id": "msg_" + uuid.uuid4().hex[:20], "role": "assistant",
                    "status": "completed", "content": [{"type": "output_text", "text": "done.", "annotations": []}]}
        usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 1,
                 "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 11}
        response = {"id": rid, "object": "response", "status": "completed", "model": body.get("model"),
                    "output": [item], "usage": usage}
        if not body.get("stream"):
            return self.reply(200, response)
        events = [("response.created", {"type": "response.created", "response": dict(response, status="in_progress", output=[])}),
                  ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0, "item": item})]
        if item["type"] == "message":
            events.append(("response.output_text.delta", {"type": "response.output_text.delta", "item_id": item["id"],
                                                          "output_index": 0, "content_index": 0, "delta": "done."}))
        events += [("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item}),
                   ("response.completed", {"type": "response.completed", "response": response})]
        self.stream(events)


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    sys.stdout.close()
    server.serve_forever()


if __name__ == "__main__":
    main()
