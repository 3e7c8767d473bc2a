package store_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/store"
)

// newTask is a task as a door stores it when a message arrives: submitted, with the message in its
// history.
func newTask(id a2a.TaskID, text string) *a2a.Task {
	return &a2a.Task{
		ID:        id,
		ContextID: "ctx-1",
		Status: a2a.TaskStatus{
			State:     a2a.TaskStateSubmitted,
			Timestamp: a2a.NewTimestamp(time.Date(2026, 1, 2, 10, 30, 0, 0, time.UTC)),
		},
		History: []a2a.Message{{MessageID: "msg-1", Role: a2a.RoleUser, Parts: []a2a.Part{a2a.TextPart(text)}}},
	}
}

// A member's tasks live in one SQLite file. Create returns once the task is on disk; Get returns a copy
// the caller may change.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "member")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	s, err := store.Open(filepath.Join(dir, "tasks.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	ctx := context.Background()

	if err := s.Create(ctx, newTask("tsk-1", "summarise the report")); err != nil {
		fmt.Println(err)
		return
	}
	got, err := s.Get(ctx, "tsk-1")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(got.ID, got.Status.State, got.History[0].Text())
	// Output:
	// tsk-1 TASK_STATE_SUBMITTED summarise the report
}

// A task the store does not hold is one error, ErrNotFound, which wraps the protocol's
// a2a.ErrTaskNotFound: the door answers it as -32001 with no further mapping.
func ExampleStore_Get_notFound() {
	dir, err := os.MkdirTemp("", "member")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	s, err := store.Open(filepath.Join(dir, "tasks.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()

	_, err = s.Get(context.Background(), "tsk-missing")
	fmt.Println(errors.Is(err, store.ErrNotFound), errors.Is(err, a2a.ErrTaskNotFound))
	fmt.Println(a2a.ToJSONRPC(err).Code)
	// Output:
	// true true
	// -32001
}

// A task's changes are stored whole with Update, and outlive the process: the file opened again holds
// the task as it was last written.
func ExampleStore_Update() {
	dir, err := os.MkdirTemp("", "member")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "tasks.db")
	ctx := context.Background()

	s, err := store.Open(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	task := newTask("tsk-1", "summarise the report")
	if err := s.Create(ctx, task); err != nil {
		fmt.Println(err)
		return
	}
	task.Status = a2a.TaskStatus{
		State:     a2a.TaskStateCompleted,
		Timestamp: a2a.NewTimestamp(time.Date(2026, 1, 2, 10, 31, 0, 0, time.UTC)),
	}
	task.Artifacts = []a2a.Artifact{{ArtifactID: "art-1", Name: "response", Parts: []a2a.Part{a2a.TextPart("It says yes.")}}}
	if err := s.Update(ctx, task); err != nil {
		fmt.Println(err)
		return
	}
	if err := s.Close(); err != nil {
		fmt.Println(err)
		return
	}

	again, err := store.Open(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer again.Close()
	got, err := again.Get(ctx, "tsk-1")
	if err != nil {
		fmt.Println(err)
		return
	}
	answer, _ := got.Artifact("response")
	fmt.Println(got.Status.State, answer.Text())
	// Output:
	// TASK_STATE_COMPLETED It says yes.
}
