package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/murmur-run/murmur/member/records"
)

// Record is one line of a session's trace.jsonl.
type Record struct {
	TS      time.Time
	Type    records.Type
	Session string
	Task    string
	Member  string
	Line    int            // its line in trace.jsonl
	Fields  map[string]any // every key of the line but ts, type, session and task
}

// Str returns a field as text ("" when absent).
func (r Record) Str(key string) string {
	switch v := r.Fields[key].(type) {
	case nil:
		return ""
	case string:
		return v
	case float64:
		if v == float64(int64(v)) {
			return fmt.Sprint(int64(v))
		}
		return fmt.Sprint(v)
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}

// Num returns a numeric field, 0 when absent.
func (r Record) Num(key string) int64 {
	if v, ok := r.Fields[key].(float64); ok {
		return int64(v)
	}
	return 0
}

// Damage is a line of a trace.jsonl that is not a record: cut mid-line by a crash, or garbled.
type Damage struct {
	File    string
	Line    int
	Member  string
	Problem string
}

// maxTraceRead bounds what is read of one trace.jsonl that the console finds already long: its last
// bytes, from a line's start.
const maxTraceRead = 16 << 20

// maxTasksIndexed bounds the tasks whose records are kept; the oldest go first.
const maxTasksIndexed = 5000

// traceFile is one session's trace.jsonl as read so far.
type traceFile struct {
	path    string
	dir     string
	session string
	member  string
	other   bool // a session of another formation: skipped
	offset  int64
	line    int
	partial []byte // the bytes of a line not yet ended
	skipped bool   // its start was too old to read
}

// Tokens sums what a member's inference records say it spent.
type Tokens struct {
	Input, Output, Cached int64
	Calls                 int // inference calls
	Unreported            int // inference calls whose driver reported no tokens
}

// add counts one inference record.
func (t *Tokens) add(r Record) {
	t.Calls++
	tok, ok := r.Fields["tokens"].(map[string]any)
	if !ok {
		t.Unreported++
		return
	}
	in, _ := tok["input"].(float64)
	out, _ := tok["output"].(float64)
	cached, _ := tok["cached"].(float64)
	t.Input += int64(in)
	t.Output += int64(out)
	t.Cached += int64(cached)
}

// Call is a member call as the caller's records tell it.
type Call struct {
	ID         string
	From       string
	FromTask   string
	To         string
	ToTask     string
	Started    time.Time
	Ended      bool
	Status     string
	Offers     int64
	Delivered  bool
	DurationS  int64
	BusyOffers int
}

// index is what the tailer read from the records root.
type index struct {
	root      string
	formation string

	mu       sync.Mutex
	files    map[string]*traceFile // by path
	byTask   map[string][]Record
	order    []string // tasks in the order first seen
	taskFile map[string]*traceFile
	tokens   map[string]*Tokens
	calls    map[string]*Call       // by call id
	dlgs     map[string]*Delegation // by delegation id
	damage   []Damage
	sessions map[string]string // session id -> member
}

func newIndex(root, formation string) *index {
	return &index{root: root, formation: formation, files: map[string]*traceFile{}, byTask: map[string][]Record{},
		taskFile: map[string]*traceFile{}, tokens: map[string]*Tokens{}, calls: map[string]*Call{}, dlgs: map[string]*Delegation{},
		sessions: map[string]string{}}
}

// change is what one scan found new: tasks with new records, and whether member calls changed.
type change struct {
	tasks map[string]string // task -> member
	calls bool
	other bool // tokens or damage
}

// scan reads what was appended to every trace.jsonl under the root since the last scan.
func (x *index) scan() change {
	ch := change{tasks: map[string]string{}}
	if x.root == "" {
		return ch
	}
	paths, _ := filepath.Glob(filepath.Join(x.root, "*", "trace.jsonl"))
	slices.Sort(paths)
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, p := range paths {
		f := x.files[p]
		if f == nil {
			f = &traceFile{path: p, dir: filepath.Dir(p), session: filepath.Base(filepath.Dir(p))}
			x.files[p] = f
		}
		if f.other {
			continue
		}
		x.read(f, &ch)
	}
	return ch
}

func (x *index) read(f *traceFile, ch *change) {
	fh, err := os.Open(f.path)
	if err != nil {
		return
	}
	defer func() { _ = fh.Close() }() // only read
	st, err := fh.Stat()
	if err != nil || st.Size() <= f.offset {
		if err == nil && st.Size() < f.offset { // truncated or replaced: start again
			f.offset, f.line, f.partial = 0, 0, nil
		}
		return
	}
	if f.offset == 0 && st.Size() > maxTraceRead {
		// Keep session_start (the first line) and the last bytes.
		first, _ := readFirstLine(fh)
		if len(first) > 0 {
			x.parse(f, first, 1, ch)
		}
		f.offset = st.Size() - maxTraceRead
		f.skipped = true
		// Skip to the first whole line after the cut. When this Seek fails the one below fails too and
		// ends the read, so the newline is not looked for in the wrong place.
		if _, err := fh.Seek(f.offset, io.SeekStart); err == nil {
			buf := make([]byte, 64<<10)
			n, _ := fh.Read(buf)
			if i := bytes.IndexByte(buf[:n], '\n'); i >= 0 {
				f.offset += int64(i + 1)
			}
		}
		f.line = -1 << 30 // line numbers unknown past the skipped part
	}
	if _, err := fh.Seek(f.offset, io.SeekStart); err != nil {
		return
	}
	data, err := io.ReadAll(io.LimitReader(fh, maxTraceRead))
	if err != nil {
		return
	}
	f.offset += int64(len(data))
	data = append(f.partial, data...)
	f.partial = nil
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			f.partial = append([]byte(nil), data...)
			break
		}
		line := data[:i]
		data = data[i+1:]
		f.line++
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		x.parse(f, line, f.line, ch)
		if f.other {
			return
		}
	}
}

func readFirstLine(r io.Reader) ([]byte, error) {
	buf := make([]byte, 64<<10)
	n, err := io.ReadFull(r, buf)
	if i := bytes.IndexByte(buf[:n], '\n'); i >= 0 {
		return buf[:i], nil
	}
	return nil, err
}

func (x *index) parse(f *traceFile, line []byte, n int, ch *change) {
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		x.addDamage(f, n, "is not a complete JSON record (cut mid-line, or garbled): skipped")
		ch.other = true
		return
	}
	rec := Record{Line: n, Fields: m}
	typ, _ := m["type"].(string)
	rec.Type = records.Type(typ)
	rec.Session, _ = m["session"].(string)
	rec.Task, _ = m["task"].(string)
	if ts, ok := m["ts"].(string); ok {
		rec.TS, _ = time.Parse(time.RFC3339Nano, ts)
	}
	for _, k := range []string{"ts", "type", "session", "task"} {
		delete(m, k)
	}
	if rec.Type == "" {
		x.addDamage(f, n, "has no record type: skipped")
		ch.other = true
		return
	}
	if rec.Type == records.TypeSessionStart {
		if fm, _ := m["formation"].(string); fm != "" && x.formation != "" && fm != x.formation {
			f.other = true
			return
		}
		f.member, _ = m["member"].(string)
		x.sessions[f.session] = f.member
	}
	rec.Member = f.member
	switch rec.Type {
	case records.TypeInference:
		t := x.tokens[f.member]
		if t == nil {
			t = &Tokens{}
			x.tokens[f.member] = t
		}
		t.add(rec)
		ch.other = true
	case records.TypeMemberCallStart:
		c := x.call(rec.Str("call_id"))
		c.From, c.FromTask, c.To, c.ToTask, c.Started, c.Offers = f.member, rec.Task, rec.Str("member"), rec.Str("member_task"), rec.TS, rec.Num("offers")
		ch.calls = true
	case records.TypeMemberCall:
		c := x.call(rec.Str("call_id"))
		c.From, c.FromTask, c.To, c.Ended, c.Status = f.member, rec.Task, rec.Str("member"), true, rec.Str("status")
		if c.ToTask == "" {
			c.ToTask = rec.Str("member_task")
		}
		c.DurationS = rec.Num("duration_secs")
		c.Delivered, _ = m["delivered"].(bool)
		ch.calls = true
	case records.TypeMemberCallBusy:
		c := x.call(rec.Str("call_id"))
		c.From, c.FromTask, c.To = f.member, rec.Task, rec.Str("member")
		c.BusyOffers++
	case records.TypeDelegationStart, records.TypeDelegation:
		x.delegation(f, rec)
		ch.calls = true
	}
	if rec.Task == "" {
		return
	}
	if _, ok := x.byTask[rec.Task]; !ok {
		x.order = append(x.order, rec.Task)
		x.taskFile[rec.Task] = f
		if len(x.order) > maxTasksIndexed {
			old := x.order[0]
			x.order = x.order[1:]
			delete(x.byTask, old)
			delete(x.taskFile, old)
		}
	}
	x.byTask[rec.Task] = append(x.byTask[rec.Task], rec)
	ch.tasks[rec.Task] = f.member
}

func (x *index) call(id string) *Call {
	c := x.calls[id]
	if c == nil {
		c = &Call{ID: id}
		x.calls[id] = c
	}
	return c
}

func (x *index) addDamage(f *traceFile, n int, problem string) {
	if len(x.damage) >= 100 {
		return
	}
	x.damage = append(x.damage, Damage{File: f.path, Line: n, Member: f.member, Problem: problem})
}

// taskRecords returns a copy of a task's records, the directory of its session, and the damage found
// in that session's trace.jsonl (including a last line still unfinished).
func (x *index) taskRecords(task string) ([]Record, string, []Damage) {
	x.mu.Lock()
	defer x.mu.Unlock()
	recs := append([]Record(nil), x.byTask[task]...)
	f := x.taskFile[task]
	if f == nil {
		return recs, "", nil
	}
	var dmg []Damage
	for _, d := range x.damage {
		if d.File == f.path {
			dmg = append(dmg, d)
		}
	}
	if len(f.partial) > 0 {
		dmg = append(dmg, Damage{File: f.path, Line: f.line + 1, Member: f.member,
			Problem: "is not finished (no line end yet): it is shown once it is whole; if the member crashed, it was cut mid-line"})
	}
	if f.skipped {
		dmg = append(dmg, Damage{File: f.path, Member: f.member, Problem: fmt.Sprintf("is longer than %d MiB: only its last records were read", maxTraceRead>>20)})
	}
	return recs, f.dir, dmg
}

// memberOf returns the member whose records mention task, or "".
func (x *index) memberOf(task string) string {
	x.mu.Lock()
	defer x.mu.Unlock()
	if f := x.taskFile[task]; f != nil {
		return f.member
	}
	return ""
}

// snapshot returns the tokens per member, the member calls, and every damaged line.
func (x *index) snapshot() (map[string]Tokens, []Call, []Damage) {
	x.mu.Lock()
	defer x.mu.Unlock()
	tok := map[string]Tokens{}
	for k, v := range x.tokens {
		tok[k] = *v
	}
	calls := make([]Call, 0, len(x.calls))
	for _, c := range x.calls {
		calls = append(calls, *c)
	}
	slices.SortFunc(calls, func(a, b Call) int { return a.Started.Compare(b.Started) })
	dmg := append([]Damage(nil), x.damage...)
	for _, f := range x.files {
		if len(f.partial) > 0 {
			dmg = append(dmg, Damage{File: f.path, Line: f.line + 1, Member: f.member, Problem: "is not finished (no line end yet)"})
		}
	}
	return tok, calls, dmg
}
