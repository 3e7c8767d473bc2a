package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
)

func cmdSend(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("send", "mur send [--roster FILE [--member NAME] | --door URL] [--context ID | --task ID] [--wait | --follow] [--save DIR] TEXT", stderr)
	var t target
	t.register(fs, getenv)
	wait := fs.Bool("wait", false, "wait for the task to end and print its answer (or its failure, or the question it asks)")
	follow := fs.Bool("follow", false, "as --wait, and print the task's progress as it works (each state, tool call and artifact) on stderr")
	save := fs.String("save", "", "with --wait or --follow, save the answer's file artifacts into this folder")
	contextID := fs.String("context", "", "continue this conversation: a new task in context ID sees its earlier tasks")
	taskID := fs.String("task", "", "answer task ID, which waits for input: TEXT is the answer, or approve/deny [REASON] for an approval")
	timeout := fs.Duration("timeout", 10*time.Minute, "with --wait or --follow, how long to wait")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	text := strings.Join(fs.Args(), " ")
	if text == "" {
		if *taskID != "" {
			return usagef("give the answer: mur send --task %s approve (or deny REASON, or the answer to its question)", *taskID)
		}
		return usagef("give the task text: mur send [flags] TEXT")
	}
	if *save != "" && !*wait && !*follow {
		return usagef("--save %s needs --wait or --follow: the files are saved once the task has answered", *save)
	}
	c, err := t.connect()
	if err != nil {
		return err
	}
	defer c.close()
	d := c.door
	msg := &a2a.Message{
		MessageID: a2a.MessageID("msg_" + strings.ToLower(ulid.Make().String())),
		Role:      a2a.RoleUser,
		Parts:     []a2a.Part{a2a.TextPart(text)},
		ContextID: *contextID,
		TaskID:    a2a.TaskID(*taskID),
	}
	wctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if *follow {
		p := &progress{w: stderr}
		err := c.stream(wctx, d, a2a.MethodSendStreamingMessage, &a2a.SendMessageRequest{Message: msg}, p.event)
		switch {
		case p.msg != nil:
			fmt.Fprintln(stdout, p.msg.Text())
			return nil
		case p.id == "" && err != nil:
			return c.explain(d, err)
		case err != nil && !errors.Is(err, errStreamClosed) && wctx.Err() == nil:
			fmt.Fprintf(stderr, "mur: following task %s: %v; waiting for it by polling instead\n", p.id, err)
		}
		task, err := c.waitTask(wctx, d, p.id, *timeout)
		if err != nil {
			return err
		}
		return c.showOutcome(wctx, d, task, *save, stdout, stderr)
	}
	resp, err := d.client.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg,
		Configuration: &a2a.SendMessageConfig{ReturnImmediately: true}})
	if err != nil {
		return c.explain(d, err)
	}
	if resp.Task == nil {
		if resp.Message == nil {
			return errors.New("the door answered with neither a task nor a message")
		}
		fmt.Fprintln(stdout, resp.Message.Text())
		return nil
	}
	task := resp.Task
	if !*wait {
		fmt.Fprintf(stdout, "%s\t%s\n", task.ID, task.Status.State)
		if !task.Status.State.Terminal() {
			fmt.Fprintf(stderr, "(watch it: mur get%s --follow %s)\n", c.flagsFor(d.member), task.ID)
		}
		return nil
	}
	if task, err = c.waitTask(wctx, d, task.ID, *timeout); err != nil {
		return err
	}
	return c.showOutcome(wctx, d, task, *save, stdout, stderr)
}

// waitTask reads task id until it ends or waits for its sender.
func (c *conn) waitTask(ctx context.Context, d door, id a2a.TaskID, timeout time.Duration) (*a2a.Task, error) {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		task, err := d.client.GetTask(ctx, &a2a.GetTaskRequest{ID: id})
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("task %s still not done after %s: watch it with mur get%s --follow %s", id, timeout, c.flagsFor(d.member), id)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err != nil {
			return nil, c.explain(d, err)
		}
		if task.Status.State.Terminal() || task.Status.State.Interrupted() {
			return task, nil
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
}

// showOutcome prints how a task that ended or waits for its sender stands, as mur send --wait does: its
// answer (exit 0), the question it asks (exit 3), or how it failed (exit 1); with save, the answer's
// files are saved there.
func (c *conn) showOutcome(ctx context.Context, d door, task *a2a.Task, save string, stdout, stderr io.Writer) error {
	if task.Status.State == a2a.TaskStateInputRequired {
		c.showQuestion(stdout, d, task)
		return errReported{3}
	}
	if task.Status.State == a2a.TaskStateCompleted {
		if a, ok := task.Artifact(responseArtifact); ok {
			fmt.Fprintln(stdout, a.Text())
			var err error
			if save != "" {
				err = c.saveFiles(ctx, d, task, save, stderr)
			}
			c.noteExtras(stderr, d, task, save != "")
			c.continueHint(stderr, d, task)
			return err
		}
	}
	reason := ""
	if task.Status.Message != nil {
		reason = ": " + task.Status.Message.Text()
	}
	fmt.Fprintf(stderr, "task %s ended %s%s\n", task.ID, task.Status.State, reason)
	return errReported{1}
}

func cmdTasks(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("tasks", "mur tasks [--roster FILE [--member NAME] | --door URL] [--state STATE]", stderr)
	var t target
	t.register(fs, getenv)
	state := fs.String("state", "", "only tasks in this state, e.g. TASK_STATE_COMPLETED")
	limit := fs.Int("limit", 50, "how many tasks to show, newest first (1-100)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	c, err := t.connect()
	if err != nil {
		return err
	}
	defer c.close()
	size := *limit
	res, err := c.door.client.ListTasks(ctx, &a2a.ListTasksRequest{Status: a2a.TaskState(*state), PageSize: &size, HistoryLength: new(int)})
	if err != nil {
		return c.explain(c.door, err)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tSTATE\tUPDATED\tSTATUS")
	for _, task := range res.Tasks {
		ts, msg := "", ""
		if task.Status.Timestamp != nil {
			ts = task.Status.Timestamp.Format(time.RFC3339)
		}
		if task.Status.Message != nil {
			msg = task.Status.Message.Text()
			if len(msg) > 60 {
				msg = msg[:60] + "…"
			}
			msg = strings.ReplaceAll(msg, "\n", " ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", task.ID, strings.TrimPrefix(string(task.Status.State), "TASK_STATE_"), ts, msg)
	}
	tw.Flush()
	fmt.Fprintf(stdout, "%d of %d task(s)\n", len(res.Tasks), res.TotalSize)
	return nil
}

// showQuestion prints what a task that waits for its sender asks, and the mur send that answers it.
func (c *conn) showQuestion(w io.Writer, d door, task *a2a.Task) {
	question, approval := "", false
	if m := task.Status.Message; m != nil {
		for _, p := range m.Parts {
			var d struct {
				Question string          `json:"question"`
				Tool     string          `json:"tool"`
				Input    json.RawMessage `json:"input"`
			}
			if p.Data != nil && json.Unmarshal(p.Data, &d) == nil {
				question, approval = d.Question, d.Tool != ""
				if approval {
					question = fmt.Sprintf("%s\n  tool:  %s\n  input: %s", d.Question, d.Tool, d.Input)
				}
			}
		}
		if question == "" {
			question = m.Text()
		}
	}
	fmt.Fprintf(w, "task %s waits for your input: %s\n", task.ID, question)
	if approval {
		fmt.Fprintf(w, "answer: mur send%s --task %s --wait approve   (or: deny REASON)\n", c.flagsFor(d.member), task.ID)
		return
	}
	fmt.Fprintf(w, "answer: mur send%s --task %s --wait 'YOUR ANSWER'\n", c.flagsFor(d.member), task.ID)
}

// continueHint prints the mur send that continues the conversation of a task the operator sent; a
// conversation a member started with call-member is that member's, which no one else may continue.
func (c *conn) continueHint(w io.Writer, d door, task *a2a.Task) {
	if caller, _ := ids.Get(ids.Murmur(task.Metadata), ids.MetaCaller).(string); caller != "" {
		fmt.Fprintf(w, "(%s gave this task to %s with call-member: its conversation is %s's)\n", caller, d.where(), caller)
		return
	}
	fmt.Fprintf(w, "(to continue this conversation: mur send%s --wait --context %s TEXT)\n", c.flagsFor(d.member), task.ContextID)
}
