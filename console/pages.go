package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/oklog/ulid/v2"
)

var funcs = template.FuncMap{
	"short": shortState,
	"when": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.Local().Format("15:04:05.000")
	},
	"date": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.Local().Format("2006-01-02 15:04:05")
	},
	"iso": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(time.RFC3339Nano)
	},
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// page is what every page template gets.
type page struct {
	Title     string
	Formation string
	CSRF      string
	Nav       string
	Members   []string
	Data      any
}

func (c *Console) newPage(s *loginSession, title, nav string, data any) page {
	p := page{Title: title, Formation: c.cfg.Roster.Formation, Nav: nav, Data: data}
	if s != nil {
		p.CSRF = s.csrf
	}
	for _, m := range c.members {
		p.Members = append(p.Members, m.Name)
	}
	return p
}

// render executes a template into a buffer first, so a failure is a clear page, not half a page.
func (c *Console) render(w http.ResponseWriter, status int, name string, data any) {
	var b bytes.Buffer
	if err := c.tmpl.ExecuteTemplate(&b, name, data); err != nil {
		c.log.Error("console: rendering a page", "page", name, "err", err)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, "The console could not draw this page (%s): %v\n", name, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

// renderPage serves the whole page, or only the fragment the page's script asked for.
func (c *Console) renderPage(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	if frag := r.Header.Get("X-Console-Fragment"); frag != "" {
		if c.tmpl.Lookup("frag-"+frag) == nil {
			http.Error(w, "no fragment "+frag, http.StatusNotFound)
			return
		}
		c.render(w, status, "frag-"+frag, p)
		return
	}
	c.render(w, status, name, p)
}

type errorData struct {
	Status  int
	Heading string
	Detail  string
}

func (c *Console) errorPage(w http.ResponseWriter, r *http.Request, status int, heading, detail string) {
	c.render(w, status, "error", c.newPage(c.auth.session(r), heading, "", errorData{Status: status, Heading: heading, Detail: detail}))
}

// formationData is the formation page.
type formationData struct {
	Members []MemberView
	Graph   Graph
	Recent  []TaskRow
	Damage  []Damage
	Records string
	Entry   string
}

func (c *Console) formationView() formationData {
	tokens, calls, damage := c.records.snapshot()
	inflight := map[string]int{}
	for _, cl := range calls {
		if !cl.Ended && cl.To != "" {
			inflight[cl.From+">"+cl.To]++
		}
	}
	d := formationData{Damage: damage, Records: c.cfg.RecordsRoot, Entry: c.cfg.Roster.Entry}
	for _, m := range c.members {
		v := m.view()
		v.Tokens = tokens[m.Name]
		v.Entry = m.Name == c.cfg.Roster.Entry
		v.CanCall = c.cfg.Roster.Reachable(m.Name)
		for k, n := range inflight {
			if strings.HasPrefix(k, m.Name+">") {
				v.Inflight += n
			}
		}
		d.Members = append(d.Members, v)
		d.Recent = append(d.Recent, m.rows("", "", 10)...)
	}
	sortRows(d.Recent)
	if len(d.Recent) > 15 {
		d.Recent = d.Recent[:15]
	}
	d.Graph = layoutGraph(d.Members, inflight)
	return d
}

func sortRows(rows []TaskRow) {
	for i := 1; i < len(rows); i++ {
		for j := i; j > 0 && rows[j].Updated.After(rows[j-1].Updated); j-- {
			rows[j], rows[j-1] = rows[j-1], rows[j]
		}
	}
}

func (c *Console) formationPage(w http.ResponseWriter, r *http.Request, s *loginSession) {
	c.renderPage(w, r, http.StatusOK, "formation", c.newPage(s, "Formation "+c.cfg.Roster.Formation, "formation", c.formationView()))
}

// memberData is a member's task list.
type memberData struct {
	Member    MemberView
	Tasks     []TaskRow
	State     string
	ContextID string
	States    []StateCount
}

func (c *Console) memberPage(w http.ResponseWriter, r *http.Request, s *loginSession) {
	name := r.PathValue("member")
	m := c.byName[name]
	if m == nil {
		c.errorPage(w, r, http.StatusNotFound, "No such member",
			fmt.Sprintf("The formation %s has no member %q; its members are %s.", c.cfg.Roster.Formation, cut(name, 64), strings.Join(c.names(), ", ")))
		return
	}
	q := r.URL.Query()
	state := q.Get("state")
	if state != "" && !strings.HasPrefix(state, "TASK_STATE_") {
		state = "TASK_STATE_" + strings.ToUpper(state)
	}
	if state != "" && !a2a.TaskState(state).Valid() {
		c.errorPage(w, r, http.StatusBadRequest, "No such task state",
			fmt.Sprintf("%q is not a task state; use one of submitted, working, input_required, auth_required, completed, failed, canceled, rejected.", cut(q.Get("state"), 64)))
		return
	}
	ctxID := strings.TrimSpace(q.Get("context"))
	v := m.view()
	d := memberData{Member: v, Tasks: m.rows(a2a.TaskState(state), ctxID, 200), State: state, ContextID: ctxID, States: v.Counts}
	c.renderPage(w, r, http.StatusOK, "member", c.newPage(s, "Member "+name, name, d))
}

func (c *Console) names() []string {
	var out []string
	for _, m := range c.members {
		out = append(out, m.Name)
	}
	return out
}

var taskIDForm = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// findTask sends /tasks/ID to the member the records or the polled lists place it at, or asks each door.
func (c *Console) findTask(w http.ResponseWriter, r *http.Request, s *loginSession) {
	id := r.PathValue("task")
	if !taskIDForm.MatchString(id) {
		c.errorPage(w, r, http.StatusBadRequest, "Not a task id", fmt.Sprintf("%q is not a task id: a task id looks like tsk_01… (letters, digits, _ and -).", cut(id, 64)))
		return
	}
	member := c.records.memberOf(id)
	if member == "" {
		for _, m := range c.members {
			m.mu.Lock()
			_, ok := m.tasks[id]
			m.mu.Unlock()
			if ok {
				member = m.Name
				break
			}
		}
	}
	if member == "" {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		zero := 0
		for _, m := range c.members {
			if _, err := m.client.GetTask(ctx, &a2a.GetTaskRequest{ID: a2a.TaskID(id), HistoryLength: &zero}); err == nil {
				member = m.Name
				break
			}
		}
	}
	if member == "" {
		c.errorPage(w, r, http.StatusNotFound, "Unknown task",
			fmt.Sprintf("No member of %s knows a task %s: not in the records, and no door that answered has it. It may have been removed by the store's retention, or belong to another formation.", c.cfg.Roster.Formation, id))
		return
	}
	http.Redirect(w, r, "/members/"+member+"/tasks/"+id, http.StatusSeeOther)
}

// TaskView is the task page.
type TaskView struct {
	ID        string
	Member    string
	MemberURL string
	Task      *a2a.Task
	DoorErr   string // why the door could not be read ("" when it could)
	Unknown   bool   // the door says there is no such task
	State     a2a.TaskState
	StatusMsg string
	Message   string
	ContextID string
	Answer    string
	HasAnswer bool
	NoAnswer  string // the no-answer reason
	Failure   string
	Turns     []Turn
	Calls     []CallView
	Commands  []Command
	Notices   []Notice
	Timeline  []TimelineRow
	Damage    []Damage
	HasRecs   bool
	RecordsOn bool
	Caller    string
	CallerURL string
	Waiting   bool // input or auth required
	// What a task in TASK_STATE_INPUT_REQUIRED asks (its status message's data part): a question, or the
	// approval of a tool call with its input.
	Question  string
	Tool      string
	ToolInput string
	Ended     bool
	Started   time.Time
	// Of a member run as replicas: Replicated, and Replica, the replica that runs the task while it has
	// not ended ("" while no replica has claimed it).
	Replicated bool
	Replica    string
	// What the task used (its metadata.murmur.usage; nil when it reports none), the trace its run is in
	// and that trace's page in the trace UI (Config.TraceURL; "" without one).
	Usage    *Usage
	TraceID  string
	TraceURL string
	// Tree is the tree of tasks the request that caused this task caused, its root first (nil when the
	// task caused none and was caused by none); Request is that root, when it is another task, with
	// RequestUsage, what the root's door says the whole request used.
	Tree         []TreeNode
	Request      *TreeNode
	RequestUsage *Usage
}

// Turn is one turn of the agent loop: the inference and what followed it.
type Turn struct {
	N       int64
	At      time.Time
	Driver  string
	Model   string
	Tokens  string
	Measure string
	Tools   []ToolCall
	Other   []Notice
}

// ToolCall is one tool call as the records tell it.
type ToolCall struct {
	At       time.Time
	CallID   string
	Tool     string
	Status   string
	Summary  string
	Duration int64
	Input    string // from the record, when the member writes it
	Result   string // the fenced result, when the member writes it
	Callee   *CallView
}

// CallView is a member call with a link to the callee's task.
type CallView struct {
	Call
	Link     string
	SentText string // the callee task's message, read from its door
}

// Command is a background command with its log's last bytes.
type Command struct {
	WorkID  string
	State   string
	Exit    string
	Ops     []string
	LogTail string
	LogNote string
}

// Notice is a record worth a line of its own: the deadline notice, a continuation, a reopening…
type Notice struct {
	At   time.Time
	Kind string
	Text string
}

// TimelineRow is one record on the timeline.
type TimelineRow struct {
	At     time.Time
	Offset string
	Type   string
	Detail string
	Line   int
}

func (c *Console) taskPage(w http.ResponseWriter, r *http.Request, s *loginSession) {
	name, id := r.PathValue("member"), r.PathValue("task")
	m := c.byName[name]
	if m == nil {
		c.errorPage(w, r, http.StatusNotFound, "No such member",
			fmt.Sprintf("The formation %s has no member %q; its members are %s.", c.cfg.Roster.Formation, cut(name, 64), strings.Join(c.names(), ", ")))
		return
	}
	if !taskIDForm.MatchString(id) {
		c.errorPage(w, r, http.StatusBadRequest, "Not a task id", fmt.Sprintf("%q is not a task id: a task id looks like tsk_01… (letters, digits, _ and -).", cut(id, 64)))
		return
	}
	v := c.taskView(r.Context(), m, id)
	if v.Unknown && !v.HasRecs {
		c.errorPage(w, r, http.StatusNotFound, "Unknown task",
			fmt.Sprintf("Member %s has no task %s (its door says: %s), and the records mention none. It may have been removed by the store's retention, or the id was mistyped.", name, id, v.DoorErr))
		return
	}
	c.renderPage(w, r, http.StatusOK, "task", c.newPage(s, "Task "+id, name, v))
}

func (c *Console) taskView(ctx context.Context, m *memberWatch, id string) TaskView {
	v := TaskView{ID: id, Member: m.Name, MemberURL: m.URL, RecordsOn: c.cfg.RecordsRoot != ""}
	gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	task, err := m.client.GetTask(gctx, &a2a.GetTaskRequest{ID: a2a.TaskID(id)})
	if err != nil {
		var ae *a2a.Error
		if errors.As(err, &ae) && ae.Code == a2a.CodeTaskNotFound {
			v.Unknown = true
		}
		v.DoorErr = describeDoorError(err)
	} else {
		v.Task = task
		v.State = task.Status.State
		v.ContextID = task.ContextID
		if task.Status.Message != nil {
			v.StatusMsg = task.Status.Message.Text()
		}
		for _, h := range task.History {
			if h.Role == a2a.RoleUser {
				v.Message = h.Text()
				break
			}
		}
		if a, ok := task.Artifact("response"); ok {
			v.Answer, v.HasAnswer = a.Text(), true
		}
		if mm, ok := task.Metadata["murmur"].(map[string]any); ok {
			if caller, _ := mm["caller"].(string); caller != "" {
				v.Caller = caller
			}
		}
		v.Waiting = v.State.Interrupted()
		if v.State == a2a.TaskStateInputRequired && task.Status.Message != nil {
			v.Question, v.Tool, v.ToolInput = questionOf(task.Status.Message)
		}
		v.Ended = v.State.Terminal()
		if !v.Ended {
			v.Replica, v.Replicated = m.replicaOf(id)
		}
		v.Usage, v.TraceID = usageOf(task), traceIDOf(task)
		v.TraceURL = c.traceLink(v.TraceID)
	}
	recs, dir, dmg := c.records.taskRecords(id)
	v.Damage = dmg
	v.HasRecs = len(recs) > 0
	c.fromRecords(gctx, &v, recs, dir)
	c.requestOf(gctx, &v)
	if v.Caller != "" {
		if link := c.callerLink(id); link != "" {
			v.CallerURL = link
		}
	}
	return v
}

// callerLink finds the caller's task of a task a peer gave, from the caller's records.
func (c *Console) callerLink(task string) string {
	_, calls, _ := c.records.snapshot()
	for _, cl := range calls {
		if cl.ToTask == task && cl.From != "" && cl.FromTask != "" {
			return "/members/" + cl.From + "/tasks/" + cl.FromTask
		}
	}
	return ""
}

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

// fromRecords builds the turns, calls, commands, notices and timeline of a task from its records.
func (c *Console) fromRecords(ctx context.Context, v *TaskView, recs []Record, dir string) {
	if len(recs) == 0 {
		return
	}
	v.Started = recs[0].TS
	var cur *Turn
	calls := map[string]*CallView{}
	var pendingCalls []*CallView // member calls not yet matched to their call-member tool call
	cmds := map[string]*Command{}
	var cmdOrder []string
	addNotice := func(n Notice) {
		if cur != nil {
			cur.Other = append(cur.Other, n)
		}
		v.Notices = append(v.Notices, n)
	}
	for _, r := range recs {
		v.Timeline = append(v.Timeline, TimelineRow{At: r.TS, Offset: offset(v.Started, r.TS), Type: r.Type, Detail: detail(r), Line: r.Line})
		switch r.Type {
		case "inference":
			v.Turns = append(v.Turns, Turn{N: r.Num("turn"), At: r.TS, Driver: r.Str("driver"), Model: r.Str("model"),
				Tokens: tokensText(r), Measure: r.Str("measured_by")})
			cur = &v.Turns[len(v.Turns)-1]
		case "tool_call":
			tc := ToolCall{At: r.TS, CallID: r.Str("call_id"), Tool: r.Str("tool"), Status: r.Str("status"),
				Summary: r.Str("summary"), Duration: r.Num("duration_ms"), Input: r.Str("input"), Result: r.Str("result")}
			if tc.Tool == "call-member" && len(pendingCalls) > 0 {
				tc.Callee = pendingCalls[0]
				pendingCalls = pendingCalls[1:]
			}
			if cur == nil {
				v.Turns = append(v.Turns, Turn{})
				cur = &v.Turns[len(v.Turns)-1]
			}
			cur.Tools = append(cur.Tools, tc)
		case "member_call_start", "member_call", "member_call_busy":
			id := r.Str("call_id")
			cv := calls[id]
			if cv == nil {
				cv = &CallView{Call: Call{ID: id, From: v.Member, FromTask: v.ID}}
				calls[id] = cv
				if r.Type == "member_call_start" {
					pendingCalls = append(pendingCalls, cv)
				}
			}
			cv.To = r.Str("member")
			if t := r.Str("member_task"); t != "" {
				cv.ToTask = t
			}
			switch r.Type {
			case "member_call_start":
				cv.Started, cv.Offers = r.TS, r.Num("offers")
			case "member_call":
				cv.Ended, cv.Status, cv.DurationS = true, r.Str("status"), r.Num("duration_secs")
				cv.Delivered, _ = r.Fields["delivered"].(bool)
			case "member_call_busy":
				cv.BusyOffers++
			}
			if cv.ToTask != "" {
				cv.Link = "/members/" + cv.To + "/tasks/" + cv.ToTask
			}
		case "background_command":
			id := r.Str("work_id")
			cmd := cmds[id]
			if cmd == nil {
				cmd = &Command{WorkID: id}
				cmds[id] = cmd
				cmdOrder = append(cmdOrder, id)
			}
			cmd.State = r.Str("state")
			if _, ok := r.Fields["exit_code"]; ok {
				cmd.Exit = r.Str("exit_code")
			}
			cmd.Ops = append(cmd.Ops, r.Str("operation"))
		case "deadline_notice":
			addNotice(Notice{At: r.TS, Kind: "deadline notice", Text: fmt.Sprintf("the session's deadline is %s; %s s left when the notice went out", r.Str("at"), r.Str("left_secs"))})
		case "task_continued":
			addNotice(Notice{At: r.TS, Kind: "continuation", Text: fmt.Sprintf("the task went on with %s member answer(s)", r.Str("answers"))})
		case "task_reopened":
			addNotice(Notice{At: r.TS, Kind: "reopened", Text: "done_check reopened the task: " + detail(r)})
		case "keep_working":
			addNotice(Notice{At: r.TS, Kind: "keep working", Text: fmt.Sprintf("keep_working: %s used, %s left", r.Str("used"), r.Str("left"))})
		case "compaction":
			addNotice(Notice{At: r.TS, Kind: "compaction", Text: fmt.Sprintf("%s earlier message(s) removed: %s tokens became %s", r.Str("removed_messages"), r.Str("tokens_before"), r.Str("tokens_after"))})
		case "control_change", "control_applied", "control_refused":
			addNotice(Notice{At: r.TS, Kind: strings.ReplaceAll(r.Type, "_", " "), Text: detail(r)})
		case "task_failed":
			v.Failure = r.Str("reason")
		case "task_end":
			if r.Str("exit_status") == "no_answer" {
				v.NoAnswer = r.Str("reason")
			}
			if v.State == "" {
				v.State = a2a.TaskState(r.Str("state"))
				v.Ended = true
			}
		}
	}
	for _, id := range cmdOrder {
		cmd := cmds[id]
		cmd.LogTail, cmd.LogNote = logTail(dir, id)
		v.Commands = append(v.Commands, *cmd)
	}
	for _, cv := range calls {
		if cv.ToTask != "" {
			if m := c.byName[cv.To]; m != nil {
				if t, err := m.client.GetTask(ctx, &a2a.GetTaskRequest{ID: a2a.TaskID(cv.ToTask)}); err == nil {
					for _, h := range t.History {
						if h.Role == a2a.RoleUser {
							cv.SentText = h.Text()
							break
						}
					}
				}
			}
		}
	}
	for _, cv := range calls {
		v.Calls = append(v.Calls, *cv)
	}
	sortCalls(v.Calls)
	// The tool calls show the member call they started.
	for i := range v.Turns {
		for j := range v.Turns[i].Tools {
			if cv := v.Turns[i].Tools[j].Callee; cv != nil {
				cp := *calls[cv.ID]
				v.Turns[i].Tools[j].Callee = &cp
			}
		}
	}
}

func sortCalls(cs []CallView) {
	for i := 1; i < len(cs); i++ {
		for j := i; j > 0 && cs[j].Started.Before(cs[j-1].Started); j-- {
			cs[j], cs[j-1] = cs[j-1], cs[j]
		}
	}
}

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
	sortStrings(keys)
	var b strings.Builder
	for _, k := range keys {
		if b.Len() > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s=%s", k, r.Str(k))
	}
	return cut(b.String(), 400)
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
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
	defer f.Close()
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

// send is SendMessage with returnImmediately; the browser goes to the task's page to watch it.
func (c *Console) send(w http.ResponseWriter, r *http.Request, _ *loginSession) {
	name := r.PostFormValue("member")
	text := strings.TrimSpace(r.PostFormValue("text"))
	m := c.byName[name]
	switch {
	case m == nil:
		c.errorPage(w, r, http.StatusBadRequest, "No such member", fmt.Sprintf("Nothing was sent: the formation has no member %q; its members are %s.", cut(name, 64), strings.Join(c.names(), ", ")))
		return
	case text == "":
		c.errorPage(w, r, http.StatusBadRequest, "Nothing to send", "Nothing was sent: the message is empty. Write the task's text and send again.")
		return
	}
	msg := &a2a.Message{MessageID: a2a.MessageID("msg_" + strings.ToLower(ulid.Make().String())), Role: a2a.RoleUser,
		Parts: []a2a.Part{a2a.TextPart(text)}, ContextID: strings.TrimSpace(r.PostFormValue("context"))}
	ctx, cancel := context.WithTimeout(r.Context(), 20*time.Second)
	defer cancel()
	res, err := m.client.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg, Configuration: &a2a.SendMessageConfig{ReturnImmediately: true}})
	if err != nil {
		c.errorPage(w, r, http.StatusBadGateway, "The message was not accepted", fmt.Sprintf("Member %s's door (%s) did not take the message: %s", name, m.URL, describeDoorError(err)))
		return
	}
	if res.Task == nil {
		c.errorPage(w, r, http.StatusBadGateway, "No task", fmt.Sprintf("Member %s answered with a message, not a task: %s", name, res.Message.Text()))
		return
	}
	row := rowOf(name, res.Task)
	m.mu.Lock()
	if _, ok := m.tasks[row.ID]; !ok {
		m.tasks[row.ID] = &row
	}
	m.mu.Unlock()
	if !row.State.Terminal() {
		c.follow(m, row.ID) // the task's page then changes as the door streams the task
	}
	c.hub.publish(Event{Kind: "task", Member: name, Task: row.ID})
	http.Redirect(w, r, "/members/"+name+"/tasks/"+row.ID, http.StatusSeeOther)
}

// questionOf reads what a waiting task asks from its status message's data part (DESIGN §15); without
// one, the message's text is the question.
func questionOf(m *a2a.Message) (question, tool, input string) {
	for _, p := range m.Parts {
		var d struct {
			Question string          `json:"question"`
			Tool     string          `json:"tool"`
			Input    json.RawMessage `json:"input"`
		}
		if p.Data != nil && json.Unmarshal(p.Data, &d) == nil && d.Question != "" {
			return d.Question, d.Tool, string(d.Input)
		}
	}
	return m.Text(), "", ""
}

// answer sends a follow-up to a task that waits for input: an approval's decision (allow or deny, with
// an optional reason) as a data part, or the answer to a question as text.
func (c *Console) answer(w http.ResponseWriter, r *http.Request, _ *loginSession) {
	name, id := r.PostFormValue("member"), r.PostFormValue("task")
	decision, text := r.PostFormValue("decision"), strings.TrimSpace(r.PostFormValue("text"))
	m := c.byName[name]
	var part a2a.Part
	switch {
	case m == nil || !taskIDForm.MatchString(id):
		c.errorPage(w, r, http.StatusBadRequest, "Nothing to answer", fmt.Sprintf("Nothing was sent: member %q and task %q do not name a task of this formation.", cut(name, 64), cut(id, 64)))
		return
	case decision == "allow" || decision == "deny":
		b, _ := json.Marshal(map[string]string{"decision": decision, "reason": strings.TrimSpace(r.PostFormValue("reason"))})
		part = a2a.Part{Data: b, MediaType: "application/json"}
	case decision != "":
		c.errorPage(w, r, http.StatusBadRequest, "Not a decision", fmt.Sprintf("Nothing was sent: %q is not a decision; approve (allow) or deny.", cut(decision, 64)))
		return
	case text == "":
		c.errorPage(w, r, http.StatusBadRequest, "Nothing to send", "Nothing was sent: the answer is empty. Write the answer to the task's question and send again.")
		return
	default:
		part = a2a.TextPart(text)
	}
	msg := &a2a.Message{MessageID: a2a.MessageID("msg_" + strings.ToLower(ulid.Make().String())), Role: a2a.RoleUser,
		Parts: []a2a.Part{part}, TaskID: a2a.TaskID(id)}
	ctx, cancel := context.WithTimeout(r.Context(), 20*time.Second)
	defer cancel()
	if _, err := m.client.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg, Configuration: &a2a.SendMessageConfig{ReturnImmediately: true}}); err != nil {
		c.errorPage(w, r, http.StatusConflict, "The answer was not taken", fmt.Sprintf("Member %s's door refused the answer to %s: %s", name, id, describeDoorError(err)))
		return
	}
	c.follow(m, id) // mostly followed already: a stream stays open while its task waits for input
	c.hub.publish(Event{Kind: "task", Member: name, Task: id})
	http.Redirect(w, r, "/members/"+name+"/tasks/"+id, http.StatusSeeOther)
}

func (c *Console) cancel(w http.ResponseWriter, r *http.Request, _ *loginSession) {
	name, id := r.PostFormValue("member"), r.PostFormValue("task")
	m := c.byName[name]
	if m == nil || !taskIDForm.MatchString(id) {
		c.errorPage(w, r, http.StatusBadRequest, "Nothing to cancel", fmt.Sprintf("Nothing was canceled: member %q and task %q do not name a task of this formation.", cut(name, 64), cut(id, 64)))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 20*time.Second)
	defer cancel()
	if _, err := m.client.CancelTask(ctx, &a2a.CancelTaskRequest{ID: a2a.TaskID(id)}); err != nil {
		c.errorPage(w, r, http.StatusConflict, "The task was not canceled", fmt.Sprintf("Member %s's door refused to cancel %s: %s", name, id, describeDoorError(err)))
		return
	}
	c.hub.publish(Event{Kind: "task", Member: name, Task: id})
	http.Redirect(w, r, "/members/"+name+"/tasks/"+id, http.StatusSeeOther)
}

// Graph is the roster's reachability drawn as SVG.
type Graph struct {
	W, H  int
	Nodes []Node
	Edges []Edge
}

// Node is a member on the graph.
type Node struct {
	Name  string
	X, Y  float64
	State string
	Entry bool
}

// Edge is a reach rule between two members; Active counts the calls in flight on it.
type Edge struct {
	From, To       string
	X1, Y1, X2, Y2 float64
	Active         int
}

// layoutGraph places the members on a circle (in a row for two), in roster order.
func layoutGraph(ms []MemberView, inflight map[string]int) Graph {
	g := Graph{W: 560, H: 300}
	n := len(ms)
	cy := 150.0
	if n <= 2 {
		g.H, cy = 150, 70
	}
	pos := map[string][2]float64{}
	for i, m := range ms {
		var x, y float64
		switch {
		case n == 1:
			x, y = 280, cy
		case n == 2:
			x, y = 140+float64(i)*280, cy
		default:
			a := -math.Pi/2 + 2*math.Pi*float64(i)/float64(n)
			x, y = 280+200*math.Cos(a), 150+110*math.Sin(a)
		}
		pos[m.Name] = [2]float64{x, y}
		g.Nodes = append(g.Nodes, Node{Name: m.Name, X: x, Y: y, State: m.State(), Entry: m.Entry})
	}
	for _, m := range ms {
		for _, to := range m.CanCall {
			a, b := pos[m.Name], pos[to]
			dx, dy := b[0]-a[0], b[1]-a[1]
			l := math.Hypot(dx, dy)
			if l == 0 {
				continue
			}
			// Start and end at the node's edge (radius 40), and keep the two directions of a pair apart.
			ux, uy := dx/l, dy/l
			ox, oy := -uy*6, ux*6
			g.Edges = append(g.Edges, Edge{From: m.Name, To: to,
				X1: a[0] + ux*42 + ox, Y1: a[1] + uy*42 + oy, X2: b[0] - ux*46 + ox, Y2: b[1] - uy*46 + oy,
				Active: inflight[m.Name+">"+to]})
		}
	}
	return g
}
