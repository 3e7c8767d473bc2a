package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/oklog/ulid/v2"
)

// DefaultBuffer is how many events a subscriber may have waiting before it is dropped as too slow.
const DefaultBuffer = 256

// ErrSlowSubscriber is why a subscription ended early: it did not take its events as fast as the task
// made them, and its buffer filled.
var ErrSlowSubscriber = errors.New("the stream fell behind: its client read events more slowly than the task produced them, and the door does not hold the task back for one reader; reconnect with SubscribeToTask to get the task as it stands and what follows")

// Event is one event of a task's stream.
type Event struct {
	// Result is the JSON of the event's A2A StreamResponse: {"statusUpdate": …} or {"artifactUpdate": …}.
	// It is shared by every subscriber and must not be modified.
	Result json.RawMessage
	// Final marks the statusUpdate of the task's terminal state: the stream ends after it.
	Final bool
	// Seq is the event's number in the task's stored events (a Feed's); 0 for a Hub's, which numbers none.
	Seq int64
}

// Change is what an observer learns of each stored change of a task.
type Change struct {
	TaskID a2a.TaskID
	State  a2a.TaskState
	// Task is the task as stored by the change; an observer reads it during its call only, and never
	// modifies or keeps it.
	Task *a2a.Task
}

// Config is what a hub is given. The zero value is valid.
type Config struct {
	// Buffer is each subscriber's buffer, in events; 0 means DefaultBuffer.
	Buffer int
	// Now is the clock of progress statuses; nil means time.Now.
	Now func() time.Time
	// Dropped, when set, is called (outside the hub's lock) each time a slow subscriber is dropped.
	Dropped func()
}

// Hub fans task events out to subscribers. The zero Hub is not usable: build one with New.
type Hub struct {
	cfg Config

	mu        sync.Mutex
	topics    map[a2a.TaskID]*topic
	observers []func(Change)
	watching  []func(a2a.TaskID) bool // per observer: the tasks it wants; nil, every task
}

// topic is one watched task: its latest stored state and its subscribers.
type topic struct {
	subscribers
	contextID string
	state     a2a.TaskState
	latest    json.RawMessage // the task's JSON as of the last change its subscribers were sent
	status    []byte          // the JSON of latest's status
	artifacts int             // len(latest's artifacts)
}

// New returns a hub.
func New(cfg Config) *Hub {
	if cfg.Buffer <= 0 {
		cfg.Buffer = DefaultBuffer
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Hub{cfg: cfg, topics: map[a2a.TaskID]*topic{}}
}

// Observe adds fn to the functions every stored change is reported to. fn runs on the publisher's
// goroutine and must not block.
func (h *Hub) Observe(fn func(Change)) {
	h.ObserveTasks(fn, nil)
}

// ObserveTasks is Observe for an observer that wants the changes of some tasks only: watches reports
// whether task id is one (nil: every task). It must not block. Only Wants asks it: fn is still told of
// every change published.
func (h *Hub) ObserveTasks(fn func(Change), watches func(id a2a.TaskID) bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.observers = append(h.observers, fn)
	h.watching = append(h.watching, watches)
}

// Wants reports whether a change of task id would reach anyone now: a subscriber of the task, or an
// observer that wants it. A publisher ending thousands of tasks at once asks it, so that it builds
// only the tasks someone wants; one that starts wanting the task after Wants answered reads the task
// as the store has it (Subscribe's load, the push notifier's first read), so a change the store
// committed before Wants was asked is not lost.
func (h *Hub) Wants(id a2a.TaskID) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.topics[id] != nil {
		return true
	}
	for _, w := range h.watching {
		if w == nil || w(id) {
			return true
		}
	}
	return false
}

// Subscribe subscribes to task id. It returns the task as it stands (JSON) and a subscription to every
// later change. load reads the task from the store; it is called, under the hub's lock, only when
// nobody watches the task yet, and its error is returned as it is. For a task already in a terminal
// state the subscription's channel is closed at once.
func (h *Hub) Subscribe(id a2a.TaskID, load func() ([]byte, error)) (json.RawMessage, *Subscription, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	tp := h.topics[id]
	if tp == nil {
		body, err := load()
		if err != nil {
			return nil, nil, err
		}
		var t a2a.Task
		if err := json.Unmarshal(body, &t); err != nil {
			return nil, nil, err
		}
		if t.Status.State.Terminal() {
			return body, endedSubscription(0), nil
		}
		status, err := json.Marshal(t.Status)
		if err != nil {
			return nil, nil, err
		}
		tp = &topic{subscribers: newSubscribers(id), contextID: t.ContextID, state: t.Status.State, latest: body,
			status: status, artifacts: len(t.Artifacts)}
		h.topics[id] = tp
	}
	return tp.latest, tp.subscribe(h, h.cfg.Buffer, 0), nil
}

// Subscribers returns how many subscriptions task id has.
func (h *Hub) Subscribers(id a2a.TaskID) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return countLocked(h.topics, id)
}

// close is Subscription.Close of a Hub's subscription.
func (h *Hub) close(s *Subscription) {
	h.mu.Lock()
	defer h.mu.Unlock()
	endLocked(h.topics, s, nil)
}

// Publish reports a change of t that the store has committed: its subscribers get an artifactUpdate
// for each artifact it did not have at the last change and a statusUpdate when its status differs, and
// every observer is told. t is read, not kept.
func (h *Hub) Publish(t *a2a.Task) {
	h.mu.Lock()
	obs := h.observers
	dropped := 0
	if tp := h.topics[t.ID]; tp != nil {
		dropped = h.publishLocked(tp, t)
	}
	h.mu.Unlock()
	h.reportDropped(dropped)
	for _, fn := range obs {
		fn(Change{TaskID: t.ID, State: t.Status.State, Task: t})
	}
}

func (h *Hub) reportDropped(n int) {
	if h.cfg.Dropped != nil {
		for range n {
			h.cfg.Dropped()
		}
	}
}

func (h *Hub) publishLocked(tp *topic, t *a2a.Task) (dropped int) {
	body, err := json.Marshal(t)
	if err != nil {
		return 0
	}
	status, err := json.Marshal(t.Status)
	if err != nil {
		return 0
	}
	for i := tp.artifacts; i < len(t.Artifacts); i++ {
		ev, err := json.Marshal(a2a.StreamResponse{ArtifactUpdate: &a2a.TaskArtifactUpdateEvent{
			TaskID: t.ID, ContextID: t.ContextID, Artifact: t.Artifacts[i], LastChunk: true}})
		if err == nil {
			dropped += h.fanoutLocked(tp, Event{Result: ev})
		}
	}
	tp.latest, tp.artifacts, tp.state = body, len(t.Artifacts), t.Status.State
	if !bytes.Equal(status, tp.status) {
		tp.status = status
		ev, err := json.Marshal(a2a.StreamResponse{StatusUpdate: &a2a.TaskStatusUpdateEvent{
			TaskID: t.ID, ContextID: t.ContextID, Status: t.Status}})
		if err == nil {
			dropped += h.fanoutLocked(tp, Event{Result: ev, Final: t.Status.State.Terminal()})
		}
	}
	if t.Status.State.Terminal() {
		for s := range tp.subs {
			endLocked(h.topics, s, nil)
		}
		delete(h.topics, tp.id)
	}
	return dropped
}

// fanoutLocked hands ev to every subscriber of tp that has room, and drops the others.
func (h *Hub) fanoutLocked(tp *topic, ev Event) (dropped int) {
	for s := range tp.subs {
		if _, slow := offerLocked(h.topics, s, ev); slow {
			dropped++
		}
	}
	return dropped
}

// Progress shows the running task's transient progress (a tool call started or ended, for instance) to
// its subscribers as a statusUpdate in its current state with text as the status message, and meta as
// the message's metadata. Nothing is stored and observers are not told: a later subscriber does not see
// it.
func (h *Hub) Progress(id a2a.TaskID, text string, meta map[string]any) {
	h.mu.Lock()
	tp := h.topics[id]
	if tp == nil || tp.state.Terminal() {
		h.mu.Unlock()
		return
	}
	msg := &a2a.Message{
		MessageID: a2a.MessageID("msg_" + strings.ToLower(ulid.Make().String())),
		Role:      a2a.RoleAgent,
		Parts:     []a2a.Part{a2a.TextPart(text)},
		TaskID:    id,
		ContextID: tp.contextID,
		Metadata:  meta,
	}
	ev, err := json.Marshal(a2a.StreamResponse{StatusUpdate: &a2a.TaskStatusUpdateEvent{
		TaskID: id, ContextID: tp.contextID,
		Status: a2a.TaskStatus{State: tp.state, Message: msg, Timestamp: a2a.NewTimestamp(h.cfg.Now())}}})
	dropped := 0
	if err == nil {
		dropped = h.fanoutLocked(tp, Event{Result: ev})
	}
	h.mu.Unlock()
	h.reportDropped(dropped)
}
