package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The claude-stream-json dialect: what Claude Code writes with -p --output-format stream-json --verbose.
//
// Counting. A turn is one model call of the main agent: one message id of its assistant lines, open
// until a user line (its tool results), a subagent's line, another message or the result closes it.
// Claude Code writes one assistant line per content block, each with the message's usage as it stood
// when that block was written, so the output count of those lines is low; the final counts are the
// result's usage (the run's totals), and a stream_event message_delta's usage (with
// --include-partial-messages). The turn still open at the result takes whatever the result's totals hold
// beyond the turns already counted; turns the result's num_turns counts and the stream never showed are
// counted there too. Lines of a subagent (parent_tool_use_id set) are no turn of the session's: the
// result's totals already hold their tokens. The placeholder message Claude Code writes itself (model
// "<synthetic>", at a usage limit or an API error) is no model call.

// claudeToolServer is the name murmur's MCP config gives the session's tool server
// (server.ToolServerName); Claude Code names its tools mcp__<server>__<tool>.
const claudeToolServer = "murmur"

// claudeSynthetic is the model of the messages Claude Code writes itself.
const claudeSynthetic = "<synthetic>"

// claudeState is what the claude-stream-json parser keeps between lines.
type claudeState struct {
	// The main agent's message whose turn is open, and the highest usage seen for it.
	openID    string
	openUsage Usage
	openLine  int

	closed    map[string]bool // message ids whose turn was emitted
	turns     int             // turns emitted
	synthetic int             // placeholder messages seen: no model call, but num_turns counts them
	counted   Usage           // the sum of the turns emitted
	lastText  string
	// unreachable says why the session's tools are out of Claude Code's reach, from its init line.
	unreachable string
}

type claudeUsage struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
}

func (u *claudeUsage) usage() Usage {
	if u == nil {
		return Usage{}
	}
	return Usage{
		Input: deref(u.InputTokens), Output: deref(u.OutputTokens),
		Cached: deref(u.CacheReadInputTokens), CacheWrite: deref(u.CacheCreationInputTokens),
		Reported:      u.InputTokens != nil || u.OutputTokens != nil,
		CacheReported: u.CacheReadInputTokens != nil || u.CacheCreationInputTokens != nil,
	}
}

// The fields below that are raw are read leniently: a shape this parser does not expect there must
// not make the whole line garbage (and lose the session id or the answer with it).
type claudeEvent struct {
	Type            string  `json:"type"`
	Subtype         string  `json:"subtype"`
	SessionID       string  `json:"session_id"`
	ParentToolUseID *string `json:"parent_tool_use_id"`
	Message         *struct {
		ID      string          `json:"id"`
		Model   string          `json:"model"`
		Content json.RawMessage `json:"content"`
		Usage   *claudeUsage    `json:"usage"`
	} `json:"message"`
	// system init
	Tools      json.RawMessage `json:"tools"`
	MCPServers json.RawMessage `json:"mcp_servers"`
	// stream_event
	Event json.RawMessage `json:"event"`
	// result
	Result            *string         `json:"result"`
	IsError           bool            `json:"is_error"`
	NumTurns          int             `json:"num_turns"`
	Usage             *claudeUsage    `json:"usage"`
	Errors            json.RawMessage `json:"errors"`
	PermissionDenials json.RawMessage `json:"permission_denials"`
	// rate_limit_event
	RateLimitInfo *claudeRateLimit `json:"rate_limit_info"`
}

type claudeRateLimit struct {
	Status         string                         `json:"status"`
	ResetsAt       *float64                       `json:"resetsAt"`
	RateLimitType  string                         `json:"rateLimitType"`
	Utilization    *float64                       `json:"utilization"`
	UnifiedWindows map[string]claudeUnifiedWindow `json:"unifiedWindows"`
}

type claudeUnifiedWindow struct {
	Utilization *float64 `json:"utilization"`
	ResetsAt    *float64 `json:"resetsAt"`
}

// claudeWindows are the lengths of Claude's subscription windows by the name its rate-limit events give.
var claudeWindows = map[string]int64{"five_hour": 300, "seven_day": 7 * 24 * 60, "seven_day_opus": 7 * 24 * 60, "seven_day_sonnet": 7 * 24 * 60}

// claudeStates maps a rate-limit event's status to SPEC's quota states.
var claudeStates = map[string]string{"allowed": "ok", "allowed_warning": "warning", "rejected": "exhausted"}

// claudeUnified names the quota of a rate-limit event that names no window: the subscription's overall
// ("unified") limit.
const claudeUnified = "unified"

func (p *parser) claude(n int, line []byte) error {
	var e claudeEvent
	if err := json.Unmarshal(line, &e); err != nil {
		return notJSON(err)
	}
	sub := e.ParentToolUseID != nil && *e.ParentToolUseID != ""
	switch e.Type {
	case "system":
		p.sessionOf(n, e.SessionID)
		if e.Subtype == "init" {
			p.claudeInit(n, e)
		}
	case "assistant":
		if e.Message == nil {
			return errors.New("an assistant event without a message")
		}
		if sub || e.Message.Model == claudeSynthetic {
			p.closeTurn()
			p.sessionOf(n, e.SessionID)
			if !sub {
				p.cs.synthetic++
			}
			return nil
		}
		id := e.Message.ID
		// A block of a message whose turn a tool result already closed (Claude Code runs a tool while the
		// message still streams) is no new turn; the result's totals hold its tokens.
		again := id != "" && p.cs.closed[id]
		if !again && (id == "" || id != p.cs.openID) {
			p.closeTurn()
			p.openTurn(id, n)
		}
		p.sessionOf(n, e.SessionID)
		if !again {
			p.cs.openUsage = maxUsage(p.cs.openUsage, e.Message.Usage.usage())
		}
		if t := claudeText(e.Message.Content); strings.TrimSpace(t) != "" {
			p.cs.lastText = t
		}
	case "user":
		p.closeTurn()
		p.sessionOf(n, e.SessionID)
	case "stream_event":
		p.sessionOf(n, e.SessionID)
		if !sub {
			return p.claudeStream(n, e.Event)
		}
	case "rate_limit_event":
		qs, err := claudeQuota(e.RateLimitInfo)
		if err != nil {
			return err
		}
		p.sessionOf(n, e.SessionID)
		for _, q := range qs {
			p.emit(Event{Kind: KindQuota, Line: n, Quota: q})
		}
	case "result":
		p.claudeResult(n, e)
	case "":
		return errors.New(`no "type"`)
	default:
		return fmt.Errorf("unknown event type %q", e.Type)
	}
	return nil
}

func (p *parser) openTurn(id string, n int) {
	if id == "" {
		id = fmt.Sprintf("line %d", n)
	}
	p.cs.openID, p.cs.openLine, p.cs.openUsage = id, n, Usage{}
}

// closeTurn emits the open turn, if any.
func (p *parser) closeTurn() {
	c := &p.cs
	if c.openID == "" {
		return
	}
	c.turns++
	c.counted = addUsage(c.counted, c.openUsage)
	if c.closed == nil {
		c.closed = map[string]bool{}
	}
	c.closed[c.openID] = true
	p.emit(Event{Kind: KindTurn, Line: c.openLine, Usage: c.openUsage})
	c.openID, c.openUsage = "", Usage{}
}

// claudeInit checks that Claude Code reached the session's tool server and lists its tools.
func (p *parser) claudeInit(n int, e claudeEvent) {
	var servers []struct {
		Name   string `json:"name"`
		Status string `json:"status"`
	}
	var tools []string
	serversSaid := json.Unmarshal(e.MCPServers, &servers) == nil && e.MCPServers != nil
	toolsSaid := json.Unmarshal(e.Tools, &tools) == nil && e.Tools != nil
	status, listed := "", false
	for _, s := range servers {
		if s.Name == claudeToolServer {
			status, listed = s.Status, true
		}
	}
	ours := slices.ContainsFunc(tools, func(t string) bool { return strings.HasPrefix(t, "mcp__"+claudeToolServer+"__") })
	var why string
	switch {
	case listed && (status == "failed" || status == "needs-auth"):
		why = fmt.Sprintf("Claude Code could not reach the session's tools: its init line gives MCP server %q the status %q", claudeToolServer, status)
	case serversSaid && !listed && !ours:
		why = fmt.Sprintf("Claude Code started without the session's tools: its init line lists no MCP server %q; give it --mcp-config {mcp_config} in harness.command", claudeToolServer)
	case toolsSaid && listed && status == "connected" && !ours:
		why = fmt.Sprintf("Claude Code started without the session's tools: MCP server %q is connected but its init line lists none of its tools (mcp__%s__*); check harness.command's --tools, --allowedTools and --disallowedTools", claudeToolServer, claudeToolServer)
	}
	if why != "" {
		p.cs.unreachable = why
		p.emit(Event{Kind: KindNotice, Line: n, Reason: NoticeToolsUnreachable, Text: why})
	}
}

// claudeStream reads a stream_event (--include-partial-messages): message_start opens the message's
// turn, message_delta carries its final usage.
func (p *parser) claudeStream(n int, raw json.RawMessage) error {
	if raw == nil {
		return nil
	}
	var se struct {
		Type    string `json:"type"`
		Message *struct {
			ID    string       `json:"id"`
			Usage *claudeUsage `json:"usage"`
		} `json:"message"`
		Usage *claudeUsage `json:"usage"`
	}
	if err := json.Unmarshal(raw, &se); err != nil {
		return notJSON(err)
	}
	switch se.Type {
	case "message_start":
		if se.Message == nil {
			return nil
		}
		if id := se.Message.ID; (id == "" || id != p.cs.openID) && !p.cs.closed[id] {
			p.closeTurn()
			p.openTurn(id, n)
		}
		p.cs.openUsage = maxUsage(p.cs.openUsage, se.Message.Usage.usage())
	case "message_delta":
		if p.cs.openID != "" {
			p.cs.openUsage = maxUsage(p.cs.openUsage, se.Usage.usage())
		}
	}
	return nil
}

func (p *parser) claudeResult(n int, e claudeEvent) {
	c := &p.cs
	final := e.Usage.usage()
	rest := Usage{}
	if final.Reported || final.CacheReported {
		rest = subUsage(final, addUsage(c.counted, c.openUsage))
		rest.Reported, rest.CacheReported = final.Reported, final.CacheReported
	}
	if c.openID != "" {
		c.openUsage = addUsage(c.openUsage, rest)
		rest = Usage{}
		p.closeTurn()
	}
	for c.turns+c.synthetic < e.NumTurns {
		c.turns++
		c.counted = addUsage(c.counted, rest)
		p.emit(Event{Kind: KindTurn, Line: n, Usage: rest})
		rest = Usage{}
	}
	p.sessionOf(n, e.SessionID)
	denied := claudeDenials(e.PermissionDenials)
	if denied != "" {
		p.emit(Event{Kind: KindNotice, Line: n, Reason: NoticePermissionDenied, Text: denied})
	}
	text := ""
	if e.Result != nil {
		text = *e.Result
	}
	isError := e.IsError || e.Subtype != "success" && e.Subtype != ""
	switch {
	case isError && strings.TrimSpace(text) == "":
		text = strings.Join(claudeErrors(e.Errors), "; ")
		if e.Subtype != "" && e.Subtype != "success" {
			text = strings.TrimSuffix(e.Subtype+": "+text, ": ")
		}
		if text == "" {
			text = "Claude Code's result says is_error and gives no reason"
		}
	case !isError && strings.TrimSpace(text) == "":
		// Claude Code's result is the text of its last message; when that message had none, the answer
		// is the last text it wrote in the run.
		text = c.lastText
	}
	if c.unreachable != "" {
		isError = true
		if strings.TrimSpace(text) != "" {
			text = c.unreachable + "; its answer was: " + text
		} else {
			text = c.unreachable
		}
	}
	if isError && denied != "" {
		text += "; " + denied
	}
	p.emit(Event{Kind: KindAnswer, Line: n, Text: text, Session: e.SessionID, IsError: isError})
}

// claudeText is the text blocks of an assistant message's content, joined.
func claudeText(raw json.RawMessage) string {
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &blocks) != nil {
		return ""
	}
	var parts []string
	for _, b := range blocks {
		if b.Type == "text" && b.Text != "" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// claudeErrors reads a result's errors: strings, or objects with a message.
func claudeErrors(raw json.RawMessage) []string {
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return nil
	}
	var out []string
	for _, it := range items {
		var s string
		if json.Unmarshal(it, &s) == nil {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
			continue
		}
		var o struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(it, &o) == nil && o.Message != "" {
			out = append(out, o.Message)
		}
	}
	return out
}

// claudeDenials is the sentence saying which tool calls Claude Code refused itself, "" none.
func claudeDenials(raw json.RawMessage) string {
	var denials []struct {
		ToolName string `json:"tool_name"`
	}
	if json.Unmarshal(raw, &denials) != nil || len(denials) == 0 {
		return ""
	}
	var names []string
	for _, d := range denials {
		if d.ToolName != "" && !slices.Contains(names, d.ToolName) {
			names = append(names, d.ToolName)
		}
	}
	return fmt.Sprintf("Claude Code refused %d of its own tool call(s) for want of permission (%s); give it --permission-mode (or --allowedTools) in harness.command",
		len(denials), strings.Join(names, ", "))
}

// claudeQuota reads a rate_limit_event: one quota per window of unifiedWindows, the window
// rateLimitType names (with the event's status as its state), and, when the event names no window, the
// overall limit as "unified".
func claudeQuota(ri *claudeRateLimit) ([]Quota, error) {
	if ri == nil {
		return nil, errors.New("a rate_limit_event without rate_limit_info")
	}
	var out []Quota
	add := func(kind string, used, resets *float64, state string) error {
		var at string
		if resets != nil {
			at = time.Unix(int64(*resets), 0).UTC().Format(time.RFC3339)
		}
		var window *int64
		if w, ok := claudeWindows[kind]; ok {
			window = &w
		}
		q, err := quota(strings.ReplaceAll(kind, "_", "-"), used, at, window, state)
		if err == nil {
			out = append(out, q)
		}
		return err
	}
	state := claudeStates[ri.Status]
	names := make([]string, 0, len(ri.UnifiedWindows))
	for k := range ri.UnifiedWindows {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		w, st := ri.UnifiedWindows[k], ""
		if k == ri.RateLimitType {
			st = state
			if w.Utilization == nil {
				w.Utilization = ri.Utilization
			}
			if w.ResetsAt == nil {
				w.ResetsAt = ri.ResetsAt
			}
		}
		if err := add(k, w.Utilization, w.ResetsAt, st); err != nil {
			return nil, err
		}
	}
	switch _, inWindows := ri.UnifiedWindows[ri.RateLimitType]; {
	case ri.RateLimitType != "" && !inWindows:
		if err := add(ri.RateLimitType, ri.Utilization, ri.ResetsAt, state); err != nil {
			return nil, err
		}
	case ri.RateLimitType == "" && (ri.Status != "" || ri.Utilization != nil || ri.ResetsAt != nil) &&
		(len(names) == 0 || ri.Status != "allowed" || ri.Utilization != nil || ri.ResetsAt != nil):
		if err := add(claudeUnified, ri.Utilization, ri.ResetsAt, state); err != nil {
			return nil, err
		}
	}
	if len(out) == 0 {
		return nil, errors.New("a rate_limit_event that reports no window")
	}
	return out, nil
}

func maxUsage(a, b Usage) Usage {
	return Usage{
		Input: max(a.Input, b.Input), Output: max(a.Output, b.Output),
		Cached: max(a.Cached, b.Cached), CacheWrite: max(a.CacheWrite, b.CacheWrite),
		Reported: a.Reported || b.Reported, CacheReported: a.CacheReported || b.CacheReported,
	}
}

func addUsage(a, b Usage) Usage {
	return Usage{
		Input: a.Input + b.Input, Output: a.Output + b.Output,
		Cached: a.Cached + b.Cached, CacheWrite: a.CacheWrite + b.CacheWrite,
		Reported: a.Reported || b.Reported, CacheReported: a.CacheReported || b.CacheReported,
	}
}

// subUsage is a less b, field by field, never below zero.
func subUsage(a, b Usage) Usage {
	return Usage{
		Input: max(a.Input-b.Input, 0), Output: max(a.Output-b.Output, 0),
		Cached: max(a.Cached-b.Cached, 0), CacheWrite: max(a.CacheWrite-b.CacheWrite, 0),
	}
}
