package converse

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/murmur-run/murmur/a2a"
)

// DefaultInputWait bounds a wait for the sender when lifecycle.input_wait_secs is not set.
const DefaultInputWait = 3600 * time.Second

// InputWait is how long a task waits for its sender: lifecycle.input_wait_secs (secs), DefaultInputWait
// when it is not set.
func InputWait(secs *int) time.Duration {
	if secs == nil {
		return DefaultInputWait
	}
	return time.Duration(*secs) * time.Second
}

// The decisions a follow-up gives an approval.
const (
	Allow = "allow"
	Deny  = "deny"
)

// Question is what a waiting task asks its sender. An approval (Tool set) is asked by an on-tool-call
// hook about one tool call and is answered allow or deny; any other question (the script driver's
// ask: turn) is answered with text.
type Question struct {
	Text  string
	Tool  string          // the tool call to approve; "" for a plain question
	Input json.RawMessage // the tool call's input
	Hook  string          // the hook that asked
}

// Approval reports whether q asks to approve a tool call.
func (q Question) Approval() bool { return q.Tool != "" }

// Parts are the parts of the status message of a task waiting on q: the question as text, with how to
// answer, then a data part naming the question, the tool and its input.
func (q Question) Parts(task a2a.TaskID) []a2a.Part {
	text := q.Text
	data := map[string]any{"question": q.Text}
	if q.Approval() {
		input := q.Input
		if len(input) == 0 {
			input = json.RawMessage(`{}`)
		}
		text = fmt.Sprintf("%s\n\nThe tool %s is to be called with %s. %s", q.Text, q.Tool, input, q.Expected(task))
		data["tool"], data["input"], data["hook"] = q.Tool, input, q.Hook
	} else {
		text = fmt.Sprintf("%s\n\n%s", q.Text, q.Expected(task))
	}
	b, _ := json.Marshal(data)
	return []a2a.Part{a2a.TextPart(text), {Data: b, MediaType: "application/json"}}
}

// Expected says how a follow-up answers q.
func (q Question) Expected(task a2a.TaskID) string {
	if q.Approval() {
		return fmt.Sprintf(`Answer with a message naming taskId %s: a text starting with "approve" or "deny" (the rest is the reason), or a data part {"decision": "allow" | "deny", "reason": "…"}.`, task)
	}
	return fmt.Sprintf("Answer with a message naming taskId %s whose text is the answer.", task)
}

// Reply is a sender's answer to a Question.
type Reply struct {
	Decision string // Allow or Deny, for an approval
	Reason   string // why, as the sender said it; may be empty
	Text     string // the answer, for a plain question
}

// ParseReply reads msg as the answer to q, or says what is wrong with it and what is expected.
func ParseReply(q Question, task a2a.TaskID, msg *a2a.Message) (Reply, error) {
	bad := func(format string, args ...any) (Reply, error) {
		return Reply{}, fmt.Errorf("%s; %s", fmt.Sprintf(format, args...), q.Expected(task))
	}
	for i, p := range msg.Parts {
		if p.Data == nil {
			continue
		}
		if !q.Approval() {
			return bad("message.parts[%d] is a data part, but task %s asked a question", i, task)
		}
		var d struct {
			Decision *string `json:"decision"`
			Reason   string  `json:"reason"`
		}
		if err := json.Unmarshal(p.Data, &d); err != nil {
			return bad("message.parts[%d] is not a JSON object with a decision (%v)", i, err)
		}
		switch {
		case d.Decision == nil:
			return bad("message.parts[%d] has no decision", i)
		case *d.Decision == Allow || *d.Decision == Deny:
			return Reply{Decision: *d.Decision, Reason: strings.TrimSpace(d.Reason)}, nil
		default:
			return bad("message.parts[%d] decides %q, which is neither %q nor %q", i, a2a.CutID(*d.Decision), Allow, Deny)
		}
	}
	text := strings.TrimSpace(msg.Text())
	if !q.Approval() {
		if text == "" {
			return bad("the message has no text")
		}
		return Reply{Text: text}, nil
	}
	word, rest, _ := strings.Cut(text, " ")
	word = strings.TrimRight(strings.ToLower(word), ":,.!")
	reason := strings.TrimSpace(strings.TrimLeft(rest, ":,.- "))
	switch word {
	case "approve", "approved", "allow":
		return Reply{Decision: Allow, Reason: reason}, nil
	case "deny", "denied":
		return Reply{Decision: Deny, Reason: reason}, nil
	}
	if text == "" {
		return bad("the message has neither text nor a data part")
	}
	return bad("the message %q neither approves nor denies", a2a.CutID(text))
}

// ErrNotWaiting is Deliver's answer for a task that waits for nothing.
var ErrNotWaiting = errors.New("the task is not waiting for input")

// ErrTimedOut is Wait's error when the sender did not answer in time.
var ErrTimedOut = errors.New("no answer in time")

// Waiter holds the questions of waiting tasks until their senders answer. Safe for concurrent use.
type Waiter struct {
	mu      sync.Mutex
	waiting map[a2a.TaskID]*waiting
}

type waiting struct {
	q     Question
	ch    chan Answer // buffered: Deliver never blocks on it
	taken bool        // a follow-up was delivered; guarded by Waiter.mu
}

// Answer is a delivered follow-up: its parsed Reply and the message itself. The waiting task calls
// Resumed once it has stored that it works again; Deliver returns then.
type Answer struct {
	Reply   Reply
	Message *a2a.Message
	resumed chan error
}

// Resumed tells the sender's Deliver that the task has taken the answer.
func (a Answer) Resumed() { a.resumed <- nil }

// NewWaiter returns a Waiter with no task waiting.
func NewWaiter() *Waiter { return &Waiter{waiting: map[a2a.TaskID]*waiting{}} }

// Wait blocks until a follow-up for task answers q (the caller must call its Resumed), limit passes
// (ErrTimedOut) or ctx ends (its error). limit 0 means DefaultInputWait. asked runs once the wait is
// in place, before Wait blocks: it shows the question (a follow-up may come as soon as it is shown).
func (w *Waiter) Wait(ctx context.Context, task a2a.TaskID, q Question, limit time.Duration, asked func()) (Answer, error) {
	if limit <= 0 {
		limit = DefaultInputWait
	}
	wt := &waiting{q: q, ch: make(chan Answer, 1)}
	w.mu.Lock()
	w.waiting[task] = wt
	w.mu.Unlock()
	if asked != nil {
		asked()
	}
	timer := time.NewTimer(limit)
	defer timer.Stop()
	var err error
	select {
	case a := <-wt.ch:
		w.mu.Lock()
		delete(w.waiting, task)
		w.mu.Unlock()
		return a, nil
	case <-timer.C:
		err = ErrTimedOut
	case <-ctx.Done():
		err = ctx.Err()
	}
	w.mu.Lock()
	delete(w.waiting, task)
	taken := wt.taken
	w.mu.Unlock()
	if taken {
		// A follow-up came as the wait ended: its sender learns that it came too late.
		a := <-wt.ch
		a.resumed <- ErrNotWaiting
	}
	return Answer{}, err
}

// Question returns what task waits on; ok is false when it waits for nothing.
func (w *Waiter) Question(task a2a.TaskID) (Question, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	wt, ok := w.waiting[task]
	if !ok {
		return Question{}, false
	}
	return wt.q, true
}

// Tasks lists the tasks that wait.
func (w *Waiter) Tasks() []a2a.TaskID {
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := make([]a2a.TaskID, 0, len(w.waiting))
	for id := range w.waiting {
		ids = append(ids, id)
	}
	return ids
}

// Deliver hands msg to the waiting task: it returns once the task has resumed, with the parse error
// of a message that does not answer the question (the task keeps waiting), or ErrNotWaiting.
func (w *Waiter) Deliver(ctx context.Context, task a2a.TaskID, msg *a2a.Message) error {
	w.mu.Lock()
	wt, ok := w.waiting[task]
	if !ok || wt.taken {
		w.mu.Unlock()
		return ErrNotWaiting
	}
	r, err := ParseReply(wt.q, task, msg)
	if err != nil {
		w.mu.Unlock()
		return err
	}
	wt.taken = true
	w.mu.Unlock()
	a := Answer{Reply: r, Message: msg, resumed: make(chan error, 1)}
	wt.ch <- a
	select {
	case err := <-a.resumed:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
