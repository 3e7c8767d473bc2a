package console

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/records"
)

// A task's page as its records (trace.jsonl) tell it: the turns of its agent loop, the member calls it
// made, its background commands, the notices worth a line, and the timeline of every record. Nothing
// here asks a door; what the callees' doors add is door.go's.

// taskReading is one task's records read in order: the turn they are in, and the member calls and the
// background commands met so far.
type taskReading struct {
	v        *TaskView
	cur      *Turn                // the turn the records are in; nil before the first inference
	calls    map[string]*CallView // by call id
	pending  []*CallView          // member calls not yet matched to their call-member tool call
	cmds     map[string]*Command  // by work id
	cmdOrder []string
}

// readTaskRecords fills v's turns, notices, commands, timeline and the parts of its state the records
// tell, and returns the member calls the task made, by call id, for showCalls once their doors have been
// read. dir is the session's directory, where the commands' logs are.
func readTaskRecords(v *TaskView, recs []Record, dir string) map[string]*CallView {
	if len(recs) == 0 {
		return nil
	}
	v.Started = recs[0].TS
	t := &taskReading{v: v, calls: map[string]*CallView{}, cmds: map[string]*Command{}}
	for _, r := range recs {
		t.add(r)
	}
	for _, id := range t.cmdOrder {
		cmd := t.cmds[id]
		cmd.LogTail, cmd.LogNote = logTail(dir, id)
		v.Commands = append(v.Commands, *cmd)
	}
	return t.calls
}

// add reads one record.
func (t *taskReading) add(r Record) {
	v := t.v
	v.Timeline = append(v.Timeline, TimelineRow{At: r.TS, Offset: offset(v.Started, r.TS), Type: r.Type, Detail: detail(r), Line: r.Line})
	switch r.Type {
	case records.TypeInference:
		v.Turns = append(v.Turns, Turn{N: r.Num("turn"), At: r.TS, Driver: r.Str("driver"), Model: r.Str("model"),
			Tokens: tokensText(r), Measure: r.Str("measured_by")})
		t.cur = &v.Turns[len(v.Turns)-1]
	case records.TypeToolCall:
		t.toolCall(r)
	case records.TypeMemberCallStart, records.TypeMemberCall, records.TypeMemberCallBusy:
		t.memberCall(r)
	case records.TypeBackgroundCommand:
		t.command(r)
	case records.TypeTaskFailed:
		v.Failure = r.Str("reason")
	case records.TypeTaskEnd:
		if r.Str("exit_status") == "no_answer" {
			v.NoAnswer = r.Str("reason")
		}
		if v.State == "" {
			v.State = a2a.TaskState(r.Str("state"))
			v.Ended = true
		}
	default:
		if n, ok := noticeOf(r); ok {
			if t.cur != nil {
				t.cur.Other = append(t.cur.Other, n)
			}
			v.Notices = append(v.Notices, n)
		}
	}
}

// toolCall adds a tool call to the current turn (to a turn of its own before the first inference); a
// call-member tool call shows the member call it started.
func (t *taskReading) toolCall(r Record) {
	tc := ToolCall{At: r.TS, CallID: r.Str("call_id"), Tool: r.Str("tool"), Status: r.Str("status"),
		Summary: r.Str("summary"), Duration: r.Num("duration_ms"), Input: r.Str("input"), Result: r.Str("result")}
	if tc.Tool == "call-member" && len(t.pending) > 0 {
		tc.Callee = t.pending[0]
		t.pending = t.pending[1:]
	}
	if t.cur == nil {
		t.v.Turns = append(t.v.Turns, Turn{})
		t.cur = &t.v.Turns[len(t.v.Turns)-1]
	}
	t.cur.Tools = append(t.cur.Tools, tc)
}

// memberCall reads one of a member call's records: its start, its end, or a busy callee's refusal.
func (t *taskReading) memberCall(r Record) {
	id := r.Str("call_id")
	cv := t.calls[id]
	if cv == nil {
		cv = &CallView{Call: Call{ID: id, From: t.v.Member, FromTask: t.v.ID}}
		t.calls[id] = cv
		if r.Type == records.TypeMemberCallStart {
			t.pending = append(t.pending, cv)
		}
	}
	cv.To = r.Str("member")
	if task := r.Str("member_task"); task != "" {
		cv.ToTask = task
	}
	switch r.Type {
	case records.TypeMemberCallStart:
		cv.Started, cv.Offers = r.TS, r.Num("offers")
	case records.TypeMemberCall:
		cv.Ended, cv.Status, cv.DurationS = true, r.Str("status"), r.Num("duration_secs")
		cv.Delivered, _ = r.Fields["delivered"].(bool)
	case records.TypeMemberCallBusy:
		cv.BusyOffers++
	}
	if cv.ToTask != "" {
		cv.Link = "/members/" + cv.To + "/tasks/" + cv.ToTask
	}
}

// command reads one of a background command's records.
func (t *taskReading) command(r Record) {
	id := r.Str("work_id")
	cmd := t.cmds[id]
	if cmd == nil {
		cmd = &Command{WorkID: id}
		t.cmds[id] = cmd
		t.cmdOrder = append(t.cmdOrder, id)
	}
	cmd.State = r.Str("state")
	if _, ok := r.Fields["exit_code"]; ok {
		cmd.Exit = r.Str("exit_code")
	}
	cmd.Ops = append(cmd.Ops, r.Str("operation"))
}

// noticeOf is the notice a record is worth, if it is worth one: the deadline notice, a continuation, a
// reopening…
func noticeOf(r Record) (Notice, bool) {
	switch r.Type {
	case records.TypeDeadlineNotice:
		return Notice{At: r.TS, Kind: "deadline notice", Text: fmt.Sprintf("the session's deadline is %s; %s s left when the notice went out", r.Str("at"), r.Str("left_secs"))}, true
	case records.TypeTaskContinued:
		return Notice{At: r.TS, Kind: "continuation", Text: fmt.Sprintf("the task went on with %s member answer(s)", r.Str("answers"))}, true
	case records.TypeTaskReopened:
		return Notice{At: r.TS, Kind: "reopened", Text: "done_check reopened the task: " + detail(r)}, true
	case records.TypeKeepWorking:
		return Notice{At: r.TS, Kind: "keep working", Text: fmt.Sprintf("keep_working: %s used, %s left", r.Str("used"), r.Str("left"))}, true
	case records.TypeCompaction:
		return Notice{At: r.TS, Kind: "compaction", Text: fmt.Sprintf("%s earlier message(s) removed: %s tokens became %s", r.Str("removed_messages"), r.Str("tokens_before"), r.Str("tokens_after"))}, true
	case records.TypeControlChange, records.TypeControlApplied, records.TypeControlRefused:
		return Notice{At: r.TS, Kind: strings.ReplaceAll(string(r.Type), "_", " "), Text: detail(r)}, true
	}
	return Notice{}, false
}

// showCalls puts the member calls on the page, in the order they started, and shows each call-member
// tool call the member call it started, as the callee's door completed it.
func (v *TaskView) showCalls(calls map[string]*CallView) {
	for _, cv := range calls {
		v.Calls = append(v.Calls, *cv)
	}
	slices.SortStableFunc(v.Calls, func(a, b CallView) int { return a.Started.Compare(b.Started) })
	for i := range v.Turns {
		for j := range v.Turns[i].Tools {
			if cv := v.Turns[i].Tools[j].Callee; cv != nil {
				cp := *calls[cv.ID]
				v.Turns[i].Tools[j].Callee = &cp
			}
		}
	}
}

// tokensText is what an inference record says it spent, or "not reported".
func tokensText(r Record) string {
	tok, ok := r.Fields["tokens"].(map[string]any)
	if !ok {
		return "not reported"
	}
	in, _ := tok["input"].(float64)
	out, _ := tok["output"].(float64)
	s := fmt.Sprintf("%d in, %d out", int64(in), int64(out))
	if cached, _ := tok["cached"].(float64); cached > 0 {
		s += fmt.Sprintf(", %d cached", int64(cached))
	}
	return s
}

// offset is how long after start t is, for the timeline ("" when either is unknown).
func offset(start, t time.Time) string {
	if start.IsZero() || t.IsZero() {
		return ""
	}
	d := t.Sub(start)
	if d < time.Second {
		return fmt.Sprintf("+%d ms", d.Milliseconds())
	}
	return fmt.Sprintf("+%.2f s", d.Seconds())
}

// detail renders a record's fields as key=value, short.
func detail(r Record) string {
	keys := make([]string, 0, len(r.Fields))
	for k := range r.Fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		if b.Len() > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s=%s", k, r.Str(k))
	}
	return cut(b.String(), 400)
}

var workIDForm = regexp.MustCompile(`^wrk_[0-9a-f]+$`)

// logTail returns the last bytes of a background command's log, or why there are none.
func logTail(dir, workID string) (string, string) {
	if dir == "" || !workIDForm.MatchString(workID) {
		return "", "no log: the records do not name one"
	}
	f, err := os.Open(filepath.Join(dir, "logs", workID+".log"))
	if err != nil {
		return "", "no log file: " + err.Error()
	}
	defer func() { _ = f.Close() }() // only read
	st, err := f.Stat()
	if err != nil {
		return "", err.Error()
	}
	const tail = 4 << 10
	off := max(st.Size()-tail, 0)
	b := make([]byte, st.Size()-off)
	n, _ := f.ReadAt(b, off)
	note := ""
	if off > 0 {
		note = fmt.Sprintf("the last %d of %d bytes", n, st.Size())
	}
	return string(b[:n]), note
}
