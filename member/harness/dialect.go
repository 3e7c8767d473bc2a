package harness

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// Dialect is how a harness writes its events on stdout (murmur.yaml's harness.dialect).
type Dialect string

// The dialects of DESIGN §13.
const (
	// ClaudeStreamJSON is Claude Code's --output-format stream-json: a system init event with the
	// session id, its tools and MCP servers; assistant events (one line per content block, a model turn
	// per message id of the main agent); user events (tool results); rate-limit events; stream events
	// (--include-partial-messages); and a result event with the final text and the run's final usage.
	// claude.go says how turns and tokens are counted.
	ClaudeStreamJSON Dialect = "claude-stream-json"
	// MurmurJSONL is murmur's own: {"type":"turn","usage":{…}}, {"type":"quota",…} and
	// {"type":"answer","text":…,"session":…}, one object a line.
	MurmurJSONL Dialect = "murmur-jsonl"
)

// Dialects lists every dialect, in the order murmur.yaml's error messages name them.
var Dialects = []Dialect{ClaudeStreamJSON, MurmurJSONL}

// Kind is what an Event reports.
type Kind string

// The kinds of event.
const (
	KindSession Kind = "session" // the harness's own session id, for a resume
	KindTurn    Kind = "turn"    // a model turn the harness closed, with its usage
	KindQuota   Kind = "quota"   // a subscription window, as the harness reported it
	KindAnswer  Kind = "answer"  // the harness's final text for this run
	KindGarbage Kind = "garbage" // a line that is not an event of the dialect
	// KindNotice is something the harness reported that the task should show although it is no failure
	// of the line (claude-stream-json: tools Claude Code could not reach, calls it refused itself):
	// Reason is a short code (NoticeToolsUnreachable, NoticePermissionDenied), Text one sentence.
	KindNotice Kind = "notice"
)

// The codes of KindNotice events.
const (
	// NoticeToolsUnreachable: the harness started without the session's tool server or its tools; the
	// run's answer is then an error (the task fails saying so).
	NoticeToolsUnreachable = "tools_unreachable"
	// NoticePermissionDenied: the harness refused some of its own tool calls for want of permission.
	NoticePermissionDenied = "permission_denied"
)

// Usage is the token counts of one closed turn, as the harness reported them. Reported is false for a
// turn that carried no counts.
type Usage struct {
	Input, Output, Cached, CacheWrite int64
	Reported                          bool
	CacheReported                     bool
}

// Quota is one subscription window (SPEC's session-status quota entry). A nil field was not reported.
type Quota struct {
	Name          string     `json:"name"`
	Used          *float64   `json:"used,omitempty"`
	ResetsAt      *time.Time `json:"-"`
	WindowMinutes *int64     `json:"window_minutes,omitempty"`
	State         string     `json:"state,omitempty"`
}

// MarshalJSON writes resets_at as RFC 3339 UTC to the second, as SPEC shows it.
func (q Quota) MarshalJSON() ([]byte, error) {
	type plain Quota
	out := struct {
		plain
		ResetsAt string `json:"resets_at,omitempty"`
	}{plain: plain(q)}
	if q.ResetsAt != nil {
		out.ResetsAt = q.ResetsAt.UTC().Truncate(time.Second).Format(time.RFC3339)
	}
	return json.Marshal(out)
}

// Event is one thing the harness reported.
type Event struct {
	Kind    Kind
	Line    int    // the line of the stream it came from, from 1
	Session string // KindSession, KindAnswer (when the dialect carries it)
	Usage   Usage  // KindTurn
	Quota   Quota  // KindQuota
	// Text is the answer (KindAnswer), or for KindGarbage the line as read, cut at 200 bytes.
	Text string
	// IsError marks an answer the harness itself reported as an error (claude-stream-json's result
	// event with is_error), and for KindGarbage the reason the line was not an event.
	IsError bool
	Reason  string
}

// maxLine bounds one line of the stream; a longer line is garbage (and the rest of it skipped).
const maxLine = 4 << 20

// garbageShown is how much of a garbage line an Event keeps.
const garbageShown = 200

// ParseDialect returns the dialect named s, or an error naming the dialects there are.
func ParseDialect(s string) (Dialect, error) {
	for _, d := range Dialects {
		if string(d) == s {
			return d, nil
		}
	}
	names := make([]string, len(Dialects))
	for i, d := range Dialects {
		names[i] = string(d)
	}
	return "", fmt.Errorf("unknown harness dialect %q; use one of %s", s, strings.Join(names, ", "))
}

// Read reads a harness's stdout to its end in dialect d and hands every event to emit, in order. A line
// that is not an event (not JSON, an unknown type, a field of the wrong type, too long) is a Garbage
// event; a last line the stream ended in the middle of is parsed as it stands, and is garbage (reason
// "the stream ended mid-line") when it does not parse. The error is the reader's, never the content's.
func Read(r io.Reader, d Dialect, emit func(Event)) error {
	p := newParser(d, emit)
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	n := 0
	skipping := false
	for {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 && !skipping {
			if len(line)+len(chunk) > maxLine {
				n++
				p.garbage(n, line, fmt.Sprintf("a line longer than %d bytes", maxLine))
				line, skipping = line[:0], true
			} else {
				line = append(line, chunk...)
			}
		}
		switch {
		case err == nil:
			if skipping {
				skipping = false
			} else {
				n++
				p.line(n, bytes.TrimRight(line, "\r\n"), false)
			}
			line = line[:0]
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if len(line) > 0 && !skipping {
				n++
				p.line(n, bytes.TrimRight(line, "\r"), true)
			}
			p.end()
			return nil
		default:
			p.end()
			return err
		}
	}
}

// parser turns lines into events for one dialect.
type parser struct {
	d    Dialect
	emit func(Event)
	cs   claudeState // claude-stream-json
}

func newParser(d Dialect, emit func(Event)) *parser { return &parser{d: d, emit: emit} }

func (p *parser) garbage(n int, line []byte, reason string) {
	text := string(line)
	if len(text) > garbageShown {
		text = text[:garbageShown]
	}
	p.emit(Event{Kind: KindGarbage, Line: n, Text: text, Reason: reason})
}

func (p *parser) line(n int, line []byte, cut bool) {
	if len(bytes.TrimSpace(line)) == 0 {
		return
	}
	var err error
	switch p.d {
	case MurmurJSONL:
		err = p.murmur(n, line)
	default:
		err = p.claude(n, line)
	}
	if err != nil {
		reason := err.Error()
		if cut {
			reason = "the stream ended mid-line: " + reason
		}
		p.garbage(n, line, reason)
	}
}

// end closes a turn still open when the stream ends.
func (p *parser) end() {
	if p.d == ClaudeStreamJSON {
		p.closeTurn()
	}
}

// murmur-jsonl.

type murmurEvent struct {
	Type    string `json:"type"`
	Session string `json:"session"`
	Usage   *struct {
		Input      *int64 `json:"input"`
		Output     *int64 `json:"output"`
		Cached     *int64 `json:"cached"`
		CacheWrite *int64 `json:"cache_write"`
	} `json:"usage"`
	Name          string   `json:"name"`
	Used          *float64 `json:"used"`
	ResetsAt      string   `json:"resets_at"`
	WindowMinutes *int64   `json:"window_minutes"`
	State         string   `json:"state"`
	Text          *string  `json:"text"`
}

func (p *parser) murmur(n int, line []byte) error {
	var e murmurEvent
	if err := json.Unmarshal(line, &e); err != nil {
		return notJSON(err)
	}
	switch e.Type {
	case "turn":
		ev := Event{Kind: KindTurn, Line: n}
		if u := e.Usage; u != nil {
			ev.Usage.Reported = u.Input != nil || u.Output != nil
			ev.Usage.Input, ev.Usage.Output = deref(u.Input), deref(u.Output)
			ev.Usage.Cached, ev.Usage.CacheWrite = deref(u.Cached), deref(u.CacheWrite)
			ev.Usage.CacheReported = u.Cached != nil || u.CacheWrite != nil
			if ev.Usage.Input < 0 || ev.Usage.Output < 0 || ev.Usage.Cached < 0 || ev.Usage.CacheWrite < 0 {
				return errors.New("a turn's usage has a negative count")
			}
		}
		p.sessionOf(n, e.Session)
		p.emit(ev)
	case "quota":
		q, err := quota(e.Name, e.Used, e.ResetsAt, e.WindowMinutes, e.State)
		if err != nil {
			return err
		}
		p.sessionOf(n, e.Session)
		p.emit(Event{Kind: KindQuota, Line: n, Quota: q})
	case "answer":
		if e.Text == nil {
			return errors.New(`an answer event without "text"`)
		}
		p.sessionOf(n, e.Session)
		p.emit(Event{Kind: KindAnswer, Line: n, Text: *e.Text, Session: e.Session})
	case "session":
		if e.Session == "" {
			return errors.New(`a session event without "session"`)
		}
		p.sessionOf(n, e.Session)
	case "":
		return errors.New(`no "type"`)
	default:
		return fmt.Errorf("unknown event type %q (murmur-jsonl has turn, quota, answer, session)", e.Type)
	}
	return nil
}

// sessionOf reports a session id carried by any event.
func (p *parser) sessionOf(n int, id string) {
	if id != "" {
		p.emit(Event{Kind: KindSession, Line: n, Session: id})
	}
}

func quota(name string, used *float64, resetsAt string, window *int64, state string) (Quota, error) {
	if name == "" {
		return Quota{}, errors.New(`a quota event without "name"`)
	}
	q := Quota{Name: name, Used: used, WindowMinutes: window, State: state}
	if used != nil && (math.IsNaN(*used) || *used < 0 || *used > 1) {
		return Quota{}, fmt.Errorf("quota %q: used %v is not a fraction from 0 to 1", name, *used)
	}
	if window != nil && *window < 0 {
		return Quota{}, fmt.Errorf("quota %q: window_minutes %d is negative", name, *window)
	}
	if resetsAt != "" {
		t, err := time.Parse(time.RFC3339, resetsAt)
		if err != nil {
			return Quota{}, fmt.Errorf("quota %q: resets_at %q is not an RFC 3339 time", name, resetsAt)
		}
		t = t.UTC()
		q.ResetsAt = &t
	}
	switch state {
	case "", "ok", "warning", "exhausted":
	default:
		return Quota{}, fmt.Errorf("quota %q: state %q is none of ok, warning, exhausted", name, state)
	}
	return q, nil
}

// claude-stream-json: see claude.go.

func notJSON(err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return errors.New("not a JSON object")
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return errors.New("not a JSON object")
		}
		return fmt.Errorf("field %s is not a %s", te.Field, te.Type)
	}
	return err
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
