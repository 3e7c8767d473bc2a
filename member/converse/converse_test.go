package converse

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/nofollow/nofollowtest"
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

// TestCollect: new and changed files, inline or kept; a symbolic link is refused wherever it points, a
// FIFO is refused without being opened.
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
	syscall.Mkfifo(filepath.Join(dir, "sub", "pipe"), 0o644)
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
	want := "big.bin kept application/octet-stream|in.md refused|out.txt refused|sub/a.json {} application/json|sub/pipe refused"
	if strings.Join(got, "|") != want {
		t.Errorf("collected\n%s\nwant\n%s", strings.Join(got, "|"), want)
	}
	// What was there before and is unchanged is not reported again.
	files, err = Collect(work, Snapshot(work), keep)
	if err != nil || len(files) != 0 {
		t.Errorf("a second collect with nothing new: %+v %v", files, err)
	}
}

// TestCollectThroughALinkedOut is the attack of issue 28: a command makes out/ a link to a directory of
// kept artifact files (another task's, another member's). Nothing under it is read; the one refusal
// names the link.
func TestCollectThroughALinkedOut(t *testing.T) {
	for _, link := range []string{"out", ArtifactsDir} {
		t.Run(link, func(t *testing.T) {
			work := t.TempDir()
			other := filepath.Join(t.TempDir(), "artifacts")
			os.MkdirAll(other, 0o755)
			os.WriteFile(filepath.Join(other, "theirs.txt"), []byte("another task's file"), 0o644)
			target := other
			if link == "out" {
				target = filepath.Dir(other)
			}
			os.MkdirAll(filepath.Dir(filepath.Join(work, link)), 0o755)
			if err := os.Symlink(target, filepath.Join(work, link)); err != nil {
				t.Fatal(err)
			}
			if got := Snapshot(work); len(got) != 0 {
				t.Errorf("Snapshot listed through the link: %v", got)
			}
			files, err := Collect(work, map[string]Stamp{}, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			if len(files) != 1 || files[0].Bytes != nil || files[0].Name != ArtifactsDir ||
				!strings.Contains(files[0].Refused, "("+link+")") || !strings.Contains(files[0].Refused, "symbolic link") {
				t.Fatalf("collected %+v", files)
			}
		})
	}
}

// FuzzCollectStaysInside places, at any component of out/artifacts/…, what a command could have put
// there (links out of the workdir or back into it, FIFOs, sockets, devices), then snapshots and collects
// as a task's end does: no file outside the workdir is read, kept or listed, and nothing blocks.
func FuzzCollectStaysInside(f *testing.F) {
	for _, s := range nofollowtest.Seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, plan []byte) {
		work, outside := nofollowtest.Tree(t)
		paths := nofollowtest.Plant(t, work, outside, plan)
		keep := t.TempDir()
		done := make(chan struct{})
		var files []File
		go func() {
			defer close(done)
			Snapshot(work)
			files, _ = Collect(work, map[string]Stamp{}, keep)
		}()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("Collect blocked (plan %v)", plan)
		}
		for _, f := range files {
			if strings.Contains(string(f.Bytes), nofollowtest.Secret) {
				t.Fatalf("%s: read a file outside the workdir (plan %v)", f.Name, plan)
			}
			if f.Kept != "" {
				if b, _ := os.ReadFile(f.Kept); strings.Contains(string(b), nofollowtest.Secret) {
					t.Fatalf("%s: kept a file outside the workdir (plan %v)", f.Name, plan)
				}
			}
			if f.Refused == "" && !slices.Contains(paths, filepath.Join(ArtifactsDir, f.Name)) {
				t.Fatalf("%s was listed, and no such file was placed inside the workdir (plan %v, placed %v)", f.Name, plan, paths)
			}
		}
	})
}
