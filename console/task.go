package console

import (
	"context"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/records"
)

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
	Type   records.Type
	Detail string
	Line   int
}

// taskView puts a task's page together: what its door says (door.go), what its records say
// (taskrecords.go), with what the callees' doors say of the calls it made, and the tree of its request.
func (c *Console) taskView(ctx context.Context, m *memberWatch, id string) TaskView {
	v := TaskView{ID: id, Member: m.Name, MemberURL: m.URL, RecordsOn: c.cfg.RecordsRoot != ""}
	gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c.fromDoor(gctx, m, &v)
	recs, dir, dmg := c.records.taskRecords(id)
	v.Damage = dmg
	v.HasRecs = len(recs) > 0
	calls := readTaskRecords(&v, recs, dir)
	c.sentTexts(gctx, calls)
	v.showCalls(calls)
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
