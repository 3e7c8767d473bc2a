package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// What the fake writes in the claude-stream-json dialect, in the shapes a real Claude Code (CLI 2.0 to
// 2.1, -p --output-format stream-json --verbose) writes them:
//
//   - an init line, once its MCP servers are connected, with the tools (its own, and the session's as
//     mcp__murmur__NAME) and mcp_servers[].status;
//   - one assistant line per content block of a message, each carrying the output count as it stood when
//     the block was written (so lower than the message's final count), parent_tool_use_id null;
//   - a result line with the run's final usage, num_turns and permission_denials.
//
// -mode mcp-failed reports the murmur server "failed" and none of its tools; -mode no-tools reports it
// connected and none of its tools. Verbs of the prompt (claude-stream-json only):
//
//	subagent N        a turn that calls Task, whose subagent makes N model calls (lines with
//	                  parent_tool_use_id; their tokens are in the result's usage)
//	windows F S       a rate_limit_event with unifiedWindows five_hour F and seven_day S
//	limit             a rate_limit_event rejected (no rateLimitType), the placeholder message Claude Code
//	                  writes at a usage limit, and the result it ends with
//	max-turns         ends the run as --max-turns does: error_max_turns, the reason in errors[]
//	denied TOOL       a turn that calls TOOL, refused by Claude Code for want of permission
//	quiet             ends the run with an empty result: the answer said ("say") before a last tool call,
//	                  and a last message without text
type claudeRun struct {
	in, out int64 // the run's final usage
	denials []map[string]any
}

const fakeModel = "claude-fake-1"

func (h *harness) claudeOn() bool { return h.dialect == "claude-stream-json" }

// init writes the init line of a claude-stream-json run.
func (h *harness) init(tools []*mcp.Tool) {
	if !h.claudeOn() {
		return
	}
	names := []string{"Task", "Bash", "Read", "Write"}
	if h.mode != "mcp-failed" && h.mode != "no-tools" {
		for _, t := range tools {
			names = append(names, "mcp__murmur__"+t.Name)
		}
	}
	status := "connected"
	if h.mode == "mcp-failed" {
		status = "failed"
	}
	h.event(map[string]any{"type": "system", "subtype": "init", "cwd": ".", "session_id": h.session, "tools": names,
		"mcp_servers": []any{map[string]any{"name": "murmur", "status": status}}, "model": fakeModel,
		"permissionMode": "default", "apiKeySource": "none", "claude_code_version": "2.1.20", "uuid": h.uuid()})
}

func (h *harness) uuid() string {
	h.msgs++
	return fmt.Sprintf("00000000-0000-4000-8000-%012d", h.msgs)
}

// assistant writes one assistant line: one content block of message id, with the usage as it stood.
func (h *harness) assistant(id string, block map[string]any, in, out int64, parent any) {
	h.event(map[string]any{"type": "assistant", "message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": fakeModel, "content": []any{block},
		"stop_reason": nil, "usage": map[string]any{"input_tokens": in, "output_tokens": out}},
		"parent_tool_use_id": parent, "session_id": h.session, "uuid": h.uuid()})
}

func (h *harness) toolResult(id, text string, isError bool, parent any) {
	h.event(map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": []any{map[string]any{
		"type": "tool_result", "tool_use_id": id, "content": text, "is_error": isError}}},
		"parent_tool_use_id": parent, "session_id": h.session, "uuid": h.uuid()})
}

// claudeTurn writes one model turn of the main agent as Claude Code does: a thinking block and a text
// block, each line with the output count so far; the final count reaches only the result.
func (h *harness) claudeTurn(in, out int) {
	id := fmt.Sprintf("msg_%02d", h.turns)
	h.assistant(id, map[string]any{"type": "thinking", "thinking": "…", "signature": "sig"}, int64(in), 1, nil)
	h.assistant(id, map[string]any{"type": "text", "text": "…"}, int64(in), int64(max(out/4, 1)), nil)
	h.claude.in += int64(in)
	h.claude.out += int64(out)
}

// toolTurn writes a main-agent turn that calls tool, and counts it.
func (h *harness) toolTurn(tool string, input map[string]any) string {
	h.turns++
	id, call := fmt.Sprintf("msg_%02d", h.turns), fmt.Sprintf("toolu_%02d", h.turns)
	in := int64(100 * h.turns)
	h.assistant(id, map[string]any{"type": "tool_use", "id": call, "name": tool, "input": input}, in, 2, nil)
	h.claude.in += in
	h.claude.out += 20
	return call
}

// result is the result line of a run that ended as asked.
func (h *harness) result(answer string) map[string]any {
	denials := h.claude.denials
	if denials == nil {
		denials = []map[string]any{}
	}
	return map[string]any{"type": "result", "subtype": "success", "is_error": false, "duration_ms": 1200,
		"duration_api_ms": 1000, "num_turns": h.turns, "result": answer, "stop_reason": "end_turn",
		"session_id": h.session, "total_cost_usd": 0,
		"usage":              map[string]any{"input_tokens": h.claude.in, "output_tokens": h.claude.out, "service_tier": "standard"},
		"permission_denials": denials, "uuid": h.uuid()}
}

// claudeVerb runs the prompt's claude-stream-json verbs; a verb that ends the run sets h.ending.
func (h *harness) claudeVerb(verb, rest string, answer *string) {
	if !h.claudeOn() {
		return
	}
	switch verb {
	case "subagent":
		n, _ := strconv.Atoi(rest)
		task := h.toolTurn("Task", map[string]any{"description": "look", "prompt": "look around", "subagent_type": "general-purpose"})
		h.event(map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "text", "text": "look around"}}}, "parent_tool_use_id": task, "session_id": h.session, "uuid": h.uuid()})
		for i := range n {
			call := fmt.Sprintf("toolu_sub_%02d", i)
			h.assistant(fmt.Sprintf("msg_sub_%02d", i), map[string]any{"type": "tool_use", "id": call, "name": "Bash",
				"input": map[string]any{"command": "ls"}}, 1000, 5, task)
			h.toolResult(call, "a b", false, task)
			h.claude.in += 1000
			h.claude.out += 50
		}
		h.toolResult(task, "two files", false, nil)
	case "windows":
		f, s, _ := strings.Cut(rest, " ")
		five, _ := strconv.ParseFloat(f, 64)
		seven, _ := strconv.ParseFloat(s, 64)
		h.event(map[string]any{"type": "rate_limit_event", "rate_limit_info": map[string]any{"status": "allowed",
			"resetsAt": 1792508400, "rateLimitType": "five_hour", "overageStatus": "rejected", "isUsingOverage": false,
			"unifiedWindows": map[string]any{
				"five_hour": map[string]any{"utilization": five, "resetsAt": 1792508400},
				"seven_day": map[string]any{"utilization": seven, "resetsAt": 1792854000}}},
			"session_id": h.session, "uuid": h.uuid()})
	case "limit":
		const text = "You've hit your limit · resets 3pm (UTC)"
		h.event(map[string]any{"type": "rate_limit_event", "rate_limit_info": map[string]any{"status": "rejected"},
			"session_id": h.session, "uuid": h.uuid()})
		h.event(map[string]any{"type": "assistant", "message": map[string]any{"id": h.uuid(), "type": "message",
			"role": "assistant", "model": "<synthetic>", "content": []any{map[string]any{"type": "text", "text": text}},
			"usage": map[string]any{"input_tokens": 0, "output_tokens": 0}},
			"parent_tool_use_id": nil, "session_id": h.session, "uuid": h.uuid(), "error": "rate_limit"})
		h.ending = h.result(text)
		h.ending["is_error"] = true
		h.ending["num_turns"] = h.turns + 1
	case "max-turns":
		h.ending = h.result("")
		delete(h.ending, "result")
		h.ending["subtype"], h.ending["is_error"] = "error_max_turns", true
		h.ending["errors"] = []string{fmt.Sprintf("Reached maximum number of turns (%d)", h.turns)}
	case "denied":
		input := map[string]any{"file_path": "out.md", "content": "x"}
		call := h.toolTurn(rest, input)
		h.toolResult(call, "Claude requested permissions to use "+rest+", but you haven't granted it yet.", true, nil)
		h.claude.denials = append(h.claude.denials, map[string]any{"tool_name": rest, "tool_use_id": call, "tool_input": input})
	case "quiet":
		h.turns++
		id, call := fmt.Sprintf("msg_%02d", h.turns), fmt.Sprintf("toolu_%02d", h.turns)
		in := int64(100 * h.turns)
		h.assistant(id, map[string]any{"type": "text", "text": *answer}, in, 2, nil)
		h.assistant(id, map[string]any{"type": "tool_use", "id": call, "name": "Write",
			"input": map[string]any{"file_path": "out.md", "content": "x"}}, in, 5, nil)
		h.toolResult(call, "File created successfully at: out.md", false, nil)
		// The last message has no content block, so Claude Code writes no line for it.
		h.turns++
		h.claude.in += in + in + 50
		h.claude.out += 30 + 3
		h.ending = h.result("")
	}
}
