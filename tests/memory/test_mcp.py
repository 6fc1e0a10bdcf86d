"""`agentd mcp` over stdio, driven by the official SDK client."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from supervisor.eventindex import EventIndex, default_db
from supervisor.memory import AgentPaths
from supervisor.memory.task import read_task


def test_mcp_tools_over_stdio(plain: Path):
    params = StdioServerParameters(
        command=str(Path(sys.executable).with_name("agentd")),
        args=["--root", str(plain), "mcp"],
        env={"AGENTD_MODULE": "core"},
        cwd=str(plain),
    )

    async def session() -> None:
        async with Client(params, read_timeout_seconds=30) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(tools) == {"log_decision", "note", "add_fact", "recall", "update_task_state", "search_events"}
            no_index = await client.call_tool("search_events", {"words": ["mcp"]})
            assert no_index.is_error and "agentd recall --reindex" in no_index.content[0].text
            schema = tools["log_decision"].input_schema
            assert set(schema["required"]) == {"decision", "why"}
            assert tools["note"].input_schema["properties"]["kind"]["enum"] == ["confirmed", "hypothesis"]

            ok = await client.call_tool("log_decision", {"decision": "use MCP", "why": "because agents call tools, so we serve them", "tags": ["arch"]})
            assert not ok.is_error and re.search(r"with snapshot-[0-9A-Z]{26}: ", ok.content[0].text)
            bad = await client.call_tool("log_decision", {"decision": "x", "why": "just because"})
            assert bad.is_error and "conclusion" in bad.content[0].text
            wrong_kind = await client.call_tool("note", {"text": "x", "kind": "maybe"})
            assert wrong_kind.is_error
            assert not (await client.call_tool("note", {"text": "mcp works", "kind": "confirmed"})).is_error
            fact = await client.call_tool("add_fact", {"text": "m is one", "source": "src/m.py:1"})
            assert not fact.is_error and re.match(r"F-[0-9a-z]{8} \(core\)", fact.content[0].text)
            found = await client.call_tool("recall", {"words": ["mcp"]})
            assert "use MCP" in found.content[0].text and "mcp works" in found.content[0].text
            st = await client.call_tool("update_task_state", {"state": "tools tested", "task": "Ship MCP"})
            assert not st.is_error
            with EventIndex(default_db(plain / ".agentd"), plain, plain / ".agentd") as index:
                index.update()  # what the daemon's indexer does
            events = await client.call_tool("search_events", {"words": ["mcp"], "limit": 5})
            lines = events.content[0].text.splitlines()
            assert not events.is_error and len(lines) == 4  # two hits, two lines each
            at = next(i for i, line in enumerate(lines) if "use MCP" in line)
            assert " decision core " in lines[at] and lines[at + 1].strip() == ".agent/decisions-core.log:1"
            assert any(" engram   core " in line and "mcp works" in line for line in lines)

    anyio.run(session)
    paths = AgentPaths(plain)
    assert "use MCP" in paths.decisions("core").read_text()
    assert paths.decisions(None).read_text() == ""
    task = read_task(paths, "core")  # the agent's own module's task, not the global one
    assert (task.body, task.state) == ("Ship MCP", "tools tested")
    assert not paths.current_task.read_text().count("Ship MCP")
    assert "[@core] mcp works" in paths.engram.read_text()
