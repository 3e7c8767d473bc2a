package converse

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/driver"
)

func task(id string, at int, state a2a.TaskState, text, answer string) *a2a.Task {
	t := &a2a.Task{ID: a2a.TaskID(id), Status: a2a.TaskStatus{State: state, Timestamp: a2a.NewTimestamp(time.Unix(int64(at), 0))},
		History: []a2a.Message{{Parts: []a2a.Part{a2a.TextPart(text)}}}}
	if state == a2a.TaskStateCompleted {
		t.Artifacts = []a2a.Artifact{{Name: "response", Parts: []a2a.Part{a2a.TextPart(answer)}}}
	} else {
		t.Status.Message = &a2a.Message{Parts: []a2a.Part{a2a.TextPart(answer)}}
	}
	return t
}

// TestHistory: earlier tasks oldest first, whatever order they come in; a failed one says so; the new
// task and unfinished ones are left out.
func TestHistory(t *testing.T) {
	got := History([]*a2a.Task{
		task("tsk_new", 9, a2a.TaskStateWorking, "now", ""),
		task("tsk_2", 2, a2a.TaskStateFailed, "second", "it broke"),
		task("tsk_1", 1, a2a.TaskStateCompleted, "first", "one"),
		task("tsk_q", 8, a2a.TaskStateSubmitted, "queued", ""),
	}, "tsk_new")
	want := []driver.ChatMessage{
		{Role: driver.RoleUser, Text: "first"}, {Role: driver.RoleAssistant, Text: "one"},
		{Role: driver.RoleUser, Text: "second"},
		{Role: driver.RoleAssistant, Text: "[runtime] This earlier task of the conversation ended failed without an answer: it broke"},
	}
	if len(got) != len(want) {
		t.Fatalf("history %+v", got)
	}
	for i := range want {
		if got[i].Role != want[i].Role || got[i].Text != want[i].Text {
			t.Errorf("message %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestParseReply(t *testing.T) {
	approval := Question{Text: "May I?", Tool: "rm", Input: json.RawMessage(`{}`)}
	text := func(s string) *a2a.Message { return &a2a.Message{Parts: []a2a.Part{a2a.TextPart(s)}} }
	data := func(s string) *a2a.Message { return &a2a.Message{Parts: []a2a.Part{{Data: json.RawMessage(s)}}} }
	for _, tc := range []struct {
		name string
		q    Question
		msg  *a2a.Message
		want Reply
		err  string
	}{
		{"approve", approval, text("approve"), Reply{Decision: Allow}, ""},
		{"approve with a reason", approval, text("Approved: looks safe"), Reply{Decision: Allow, Reason: "looks safe"}, ""},
		{"deny", approval, text("deny - too risky"), Reply{Decision: Deny, Reason: "too risky"}, ""},
		{"data allow", approval, data(`{"decision":"allow"}`), Reply{Decision: Allow}, ""},
		{"data deny", approval, data(`{"decision":"deny","reason":"no"}`), Reply{Decision: Deny, Reason: "no"}, ""},
		{"other text", approval, text("sure thing"), Reply{}, `the message "sure thing" neither approves nor denies`},
		{"unknown decision", approval, data(`{"decision":"later"}`), Reply{}, `decides "later"`},
		{"no decision", approval, data(`{"reason":"x"}`), Reply{}, "has no decision"},
		{"answer", Question{Text: "Which?"}, text(" euros "), Reply{Text: "euros"}, ""},
		{"data for a question", Question{Text: "Which?"}, data(`{}`), Reply{}, "asked a question"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseReply(tc.q, "tsk_1", tc.msg)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "naming taskId tsk_1") {
					t.Errorf("error %v, want %q and what is expected", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("reply %+v (%v), want %+v", got, err, tc.want)
			}
		})
	}
}

// TestWaiter: a follow-up resumes the wait; one after the wait ended is ErrNotWaiting; a wait past its
// limit is ErrTimedOut.
func TestWaiter(t *testing.T) {
	w := NewWaiter()
	q := Question{Text: "Which?"}
	if err := w.Deliver(context.Background(), "tsk_1", &a2a.Message{Parts: []a2a.Part{a2a.TextPart("x")}}); !errors.Is(err, ErrNotWaiting) {
		t.Errorf("deliver with nobody waiting: %v", err)
	}
	asked := make(chan struct{})
	delivered := make(chan error, 1)
	go func() {
		<-asked
		delivered <- w.Deliver(context.Background(), "tsk_1", &a2a.Message{Parts: []a2a.Part{a2a.TextPart("euros")}})
	}()
	a, err := w.Wait(context.Background(), "tsk_1", q, time.Hour, func() { close(asked) })
	if err != nil || a.Reply.Text != "euros" {
		t.Fatalf("wait: %+v %v", a, err)
	}
	a.Resumed()
	if err := <-delivered; err != nil {
		t.Errorf("deliver: %v", err)
	}
	if _, err := w.Wait(context.Background(), "tsk_2", q, time.Millisecond, nil); !errors.Is(err, ErrTimedOut) {
		t.Errorf("wait past its limit: %v", err)
	}
}

// TestCollect: new and changed files, inline or kept; a symlink inside the workdir is followed, one out
// of it refused.
func TestCollect(t *testing.T) {
	work := t.TempDir()
	dir := filepath.Join(work, ArtifactsDir)
	os.MkdirAll(filepath.Join(dir, "sub"), 0o755)
	os.WriteFile(filepath.Join(dir, "old.txt"), []byte("old"), 0o644)
	before := Snapshot(work)
	os.WriteFile(filepath.Join(dir, "sub", "a.json"), []byte(`{}`), 0o644)
	os.WriteFile(filepath.Join(work, "inside.md"), []byte("# in"), 0o644)
	os.Symlink(filepath.Join(work, "inside.md"), filepath.Join(dir, "in.md"))
	outside := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(outside, []byte("s"), 0o644)
	os.Symlink(outside, filepath.Join(dir, "out.txt"))
	os.WriteFile(filepath.Join(dir, "big.bin"), make([]byte, InlineMax+1), 0o644)
	keep := filepath.Join(t.TempDir(), "keep")
	files, err := Collect(work, before, keep)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range files {
		switch {
		case f.Refused != "":
			got = append(got, f.Name+" refused")
		case f.Kept != "":
			got = append(got, f.Name+" kept "+f.MediaType)
			if b, err := os.ReadFile(f.Kept); err != nil || len(b) != InlineMax+1 {
				t.Errorf("kept copy: %d bytes, %v", len(b), err)
			}
		default:
			got = append(got, f.Name+" "+string(f.Bytes)+" "+f.MediaType)
		}
	}
	want := "big.bin kept application/octet-stream|in.md # in text/markdown; charset=utf-8|out.txt refused|sub/a.json {} application/json"
	if strings.Join(got, "|") != want {
		t.Errorf("collected\n%s\nwant\n%s", strings.Join(got, "|"), want)
	}
}
