package console

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/murmur-run/murmur/a2a"
)

// Event tells the pages that something they show changed.
type Event struct {
	Kind   string `json:"kind"` // "task", "member", "records", "calls", "resync"
	Member string `json:"member,omitempty"`
	Task   string `json:"task,omitempty"`
}

// hub fans events out to the open event streams.
type hub struct {
	mu   sync.Mutex
	subs map[*sub]struct{}
}

type sub struct {
	ch     chan Event
	lagged bool // events were dropped: the page must reload what it shows
}

func newHub() *hub { return &hub{subs: map[*sub]struct{}{}} }

func (h *hub) subscribe() *sub {
	s := &sub{ch: make(chan Event, 64)}
	h.mu.Lock()
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	return s
}

func (h *hub) unsubscribe(s *sub) {
	h.mu.Lock()
	delete(h.subs, s)
	h.mu.Unlock()
}

func (h *hub) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

// publish never blocks: a stream that is not keeping up is told to resync instead.
func (h *hub) publish(e Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		select {
		case s.ch <- e:
		default:
			s.lagged = true
		}
	}
}

func (h *hub) takeLagged(s *sub) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	l := s.lagged
	s.lagged = false
	return l
}

// TaskRow is a task as the lists show it.
type TaskRow struct {
	ID        string
	Member    string
	ContextID string
	State     a2a.TaskState
	Text      string // the task's message
	Status    string // the status message
	Updated   time.Time
	Caller    string // the calling member, for a task a peer gave
	Replica   string // the replica that runs it, for an unended task of a member run as replicas
	Usage     Usage  // its metadata.murmur.usage: what it and the tasks it caused used (zero when it reports none)
}

// Short is the state without its TASK_STATE_ prefix, in lower case.
func (t TaskRow) Short() string { return shortState(t.State) }

func shortState(s a2a.TaskState) string {
	return strings.ToLower(strings.TrimPrefix(string(s), "TASK_STATE_"))
}

// memberWatch is what polling one member's door found.
type memberWatch struct {
	Name   string
	URL    string
	client *a2a.Client
	token  string
	wake   chan struct{} // asks the poller to read now

	// following holds the tasks whose streams are open; refollow when a task whose stream broke may be
	// streamed again. Both under mu.
	following map[string]bool
	refollow  map[string]time.Time

	mu        sync.Mutex
	up        bool
	polled    bool
	err       string
	checked   time.Time
	tasks     map[string]*TaskRow
	counts    map[a2a.TaskState]int
	total     int
	watermark time.Time
	polls     int       // how many polls began (the tests tell stream updates from polled ones)
	stale     bool      // the counts per state may be out of date
	counted   time.Time // when they were last read

	// What GET /replicas said (replicas.go): whether the member runs as replicas, its replicas, and the
	// replica that runs each unended task.
	replicasRead bool
	replicasAt   time.Time
	replicated   bool
	replicasErr  string
	replicas     []ReplicaView
	owners       map[string]string
}

// wakeUp asks the member's poller to read the door now.
func (m *memberWatch) wakeUp() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// countsEvery bounds how often the counts per state (8 small ListTasks calls) are read again.
const countsEvery = time.Second

// maxPagesPerPoll bounds the ListTasks pages one poll reads.
const maxPagesPerPoll = 5

// maxTasksKept bounds the tasks a member's list keeps; the oldest go first.
const maxTasksKept = 500

// allStates are the states the formation page counts, in a reading order.
var allStates = []a2a.TaskState{a2a.TaskStateSubmitted, a2a.TaskStateWorking, a2a.TaskStateInputRequired,
	a2a.TaskStateAuthRequired, a2a.TaskStateCompleted, a2a.TaskStateFailed, a2a.TaskStateCanceled, a2a.TaskStateRejected}

// poll reads the tasks that changed since the last poll and, when any did, the counts per state. It
// returns the tasks that changed and whether the member's state (up, counts) changed.
func (m *memberWatch) poll(ctx context.Context) ([]string, bool) {
	size := a2a.MaxPageSize
	req := &a2a.ListTasksRequest{PageSize: &size}
	m.mu.Lock()
	if !m.watermark.IsZero() {
		// The store compares whole milliseconds and clocks of members may differ a little: look back.
		req.StatusTimestampAfter = a2a.NewTimestamp(m.watermark.Add(-2 * time.Second))
	}
	wasUp, wasPolled := m.up, m.polled
	m.polls++
	m.mu.Unlock()
	res, err := m.client.ListTasks(ctx, req)
	// A busy member changes more than a page between polls: read on, up to maxPagesPerPoll pages.
	for page := 1; err == nil && res.NextPageToken != "" && page < maxPagesPerPoll; page++ {
		req.PageToken = res.NextPageToken
		var more *a2a.ListTasksResponse
		if more, err = m.client.ListTasks(ctx, req); err == nil {
			more.Tasks = append(res.Tasks, more.Tasks...)
			res = more
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, false
		}
		m.mu.Lock()
		m.up, m.polled, m.err, m.checked = false, true, describeDoorError(err), time.Now()
		m.mu.Unlock()
		return nil, wasUp || !wasPolled
	}
	var changed []string
	m.mu.Lock()
	m.up, m.polled, m.err, m.checked = true, true, "", time.Now()
	for i := range res.Tasks {
		t := &res.Tasks[i]
		row := rowOf(m.Name, t)
		if old, ok := m.tasks[row.ID]; ok && old.State == row.State && old.Updated.Equal(row.Updated) && old.Usage == row.Usage {
			continue
		}
		m.tasks[row.ID] = &row
		changed = append(changed, row.ID)
		if row.Updated.After(m.watermark) {
			m.watermark = row.Updated
		}
	}
	if len(m.tasks) > maxTasksKept {
		rows := m.sortedLocked()
		for _, r := range rows[maxTasksKept:] {
			delete(m.tasks, r.ID)
		}
	}
	m.stale = m.stale || len(changed) > 0 || !wasUp
	needCounts := m.stale && time.Since(m.counted) >= countsEvery
	m.mu.Unlock()
	if needCounts {
		counts := map[a2a.TaskState]int{}
		total := 0
		one := 1
		for _, s := range allStates {
			r, err := m.client.ListTasks(ctx, &a2a.ListTasksRequest{Status: s, PageSize: &one, HistoryLength: new(int)})
			if err != nil {
				break
			}
			counts[s] = r.TotalSize
			total += r.TotalSize
		}
		m.mu.Lock()
		m.counts, m.total, m.stale, m.counted = counts, total, false, time.Now()
		m.mu.Unlock()
	}
	return changed, needCounts || !wasUp
}

func rowOf(member string, t *a2a.Task) TaskRow {
	row := TaskRow{ID: string(t.ID), Member: member, ContextID: t.ContextID, State: t.Status.State}
	if t.Status.Timestamp != nil {
		row.Updated = t.Status.Timestamp.Time
	}
	if t.Status.Message != nil {
		row.Status = cut(t.Status.Message.Text(), 200)
	}
	for _, h := range t.History {
		if h.Role == a2a.RoleUser {
			row.Text = cut(h.Text(), 200)
			break
		}
	}
	if mm, ok := t.Metadata["murmur"].(map[string]any); ok {
		row.Caller, _ = mm["caller"].(string)
	}
	if u := usageOf(t); u != nil {
		row.Usage = *u
	}
	return row
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

func (m *memberWatch) sortedLocked() []TaskRow {
	rows := make([]TaskRow, 0, len(m.tasks))
	for _, r := range m.tasks {
		row := *r
		if !row.State.Terminal() {
			row.Replica = m.replicaOfLocked(row.ID)
		}
		rows = append(rows, row)
	}
	slices.SortFunc(rows, func(a, b TaskRow) int { // newest first
		return cmp.Or(b.Updated.Compare(a.Updated), cmp.Compare(b.ID, a.ID))
	})
	return rows
}

// MemberView is a member as the formation page shows it.
type MemberView struct {
	Name     string
	URL      string
	Polled   bool
	Up       bool
	Err      string
	Checked  time.Time
	Working  int
	Queued   int
	Waiting  int // input or auth required
	Counts   []StateCount
	Total    int
	Tokens   Tokens
	Entry    bool
	CanCall  []string
	Inflight int
	// A member run as replicas: its replicas (GET /replicas), how many are live, and why they could
	// not be read.
	Replicated   bool
	Replicas     []ReplicaView
	LiveReplicas int
	ReplicasErr  string
}

// StateCount is a state and how many tasks are in it.
type StateCount struct {
	State a2a.TaskState
	Short string
	N     int
}

// State is one word for the member: down, idle, working or waiting.
func (v MemberView) State() string {
	switch {
	case !v.Polled:
		return "unknown"
	case !v.Up:
		return "down"
	case v.Working > 0:
		return "working"
	case v.Waiting > 0:
		return "waiting"
	}
	return "idle"
}

func (m *memberWatch) view() MemberView {
	m.mu.Lock()
	defer m.mu.Unlock()
	v := MemberView{Name: m.Name, URL: m.URL, Polled: m.polled, Up: m.up, Err: m.err, Checked: m.checked, Total: m.total}
	for _, s := range allStates {
		v.Counts = append(v.Counts, StateCount{State: s, Short: shortState(s), N: m.counts[s]})
	}
	v.Working = m.counts[a2a.TaskStateWorking]
	v.Queued = m.counts[a2a.TaskStateSubmitted]
	v.Waiting = m.counts[a2a.TaskStateInputRequired] + m.counts[a2a.TaskStateAuthRequired]
	m.replicasViewLocked(&v)
	return v
}

// rows returns the member's tasks, newest change first, filtered by state and context ("" for all).
func (m *memberWatch) rows(state a2a.TaskState, contextID string, limit int) []TaskRow {
	m.mu.Lock()
	rows := m.sortedLocked()
	m.mu.Unlock()
	out := rows[:0]
	for _, r := range rows {
		if (state == "" || r.State == state) && (contextID == "" || r.ContextID == contextID) {
			out = append(out, r)
		}
	}
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

// describeDoorError says in one line why a door could not be read.
func describeDoorError(err error) string {
	var ae *a2a.Error
	if errors.As(err, &ae) {
		if ae.Code == a2a.CodeUnauthenticated {
			return "the door refused the operator token: " + ae.Message
		}
		return ae.Error()
	}
	return err.Error()
}

// httpClient is the client the console reads doors with: bounded, so a door that hangs cannot hold a page.
func httpClient() *http.Client {
	return &http.Client{Timeout: 20 * time.Second}
}
