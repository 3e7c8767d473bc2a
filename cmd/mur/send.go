package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/roster"
	"github.com/murmur-run/murmur/server"
)

// target are the flags that say which door a client command talks to.
type target struct {
	door    string
	member  string
	roster  string
	token   string
	dataDir string
}

func (t *target) register(fs *flag.FlagSet, getenv func(string) string) {
	fs.StringVar(&t.door, "door", "", "the door's base URL, e.g. http://127.0.0.1:7101")
	fs.StringVar(&t.member, "member", "", "the member to talk to, found in --roster")
	fs.StringVar(&t.roster, "roster", "", "the roster.yaml that lists --member (default: the entry member when --member is empty)")
	fs.StringVar(&t.token, "token", getenv("MUR_OPERATOR_TOKEN"), "the operator token (env MUR_OPERATOR_TOKEN; default: read from the data directory beside the roster)")
	fs.StringVar(&t.dataDir, "data-dir", getenv("MUR_DATA_DIR"), "data directory holding operator.token (default .murmur/ beside the roster)")
}

// client resolves the door and the token.
func (t *target) client() (*a2a.Client, error) {
	base := strings.TrimRight(t.door, "/")
	var r *roster.Roster
	if t.roster != "" {
		var err error
		if r, err = roster.Load(t.roster); err != nil {
			return nil, usageError{err}
		}
	}
	switch {
	case base != "" && t.member != "":
		return nil, usagef("give either --door or --member with --roster, not both")
	case base != "":
	case r != nil:
		name := t.member
		if name == "" {
			name = r.Entry
		}
		if name == "" {
			name = r.Names()[0]
		}
		m, ok := r.Member(name)
		if !ok {
			return nil, usagef("%s: no member named %q; the members are %s", r.Path, name, strings.Join(r.Names(), ", "))
		}
		base = m.URL
	default:
		return nil, usagef("say which door to talk to: --door URL, or --member NAME --roster FILE")
	}
	token := t.token
	if token == "" && r != nil {
		path := filepath.Join(dataDir(t.dataDir, r), server.OperatorTokenFile)
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, usagef("no operator token: set MUR_OPERATOR_TOKEN or --token (%v)", err)
		}
		token = strings.TrimSpace(string(b))
	}
	if token == "" {
		return nil, usagef("no operator token: set MUR_OPERATOR_TOKEN or --token")
	}
	if !strings.HasSuffix(base, "/a2a") {
		base += "/a2a"
	}
	return a2a.NewClient(base, token, nil), nil
}

func cmdSend(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("send", "mur send [--door URL | --member NAME --roster FILE] [--context ID | --task ID] [--wait] TEXT", stderr)
	var t target
	t.register(fs, getenv)
	wait := fs.Bool("wait", false, "wait for the task to end and print its answer (or its failure, or the question it asks)")
	contextID := fs.String("context", "", "continue this conversation: a new task in context ID sees its earlier tasks")
	taskID := fs.String("task", "", "answer task ID, which waits for input: TEXT is the answer, or approve/deny [REASON] for an approval")
	timeout := fs.Duration("timeout", 10*time.Minute, "with --wait, how long to wait")
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
	c, err := t.client()
	if err != nil {
		return err
	}
	msg := &a2a.Message{
		MessageID: a2a.MessageID("msg_" + strings.ToLower(ulid.Make().String())),
		Role:      a2a.RoleUser,
		Parts:     []a2a.Part{a2a.TextPart(text)},
		ContextID: *contextID,
		TaskID:    a2a.TaskID(*taskID),
	}
	resp, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg,
		Configuration: &a2a.SendMessageConfig{ReturnImmediately: true}})
	if err != nil {
		return err
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
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for !task.Status.State.Terminal() && !task.Status.State.Interrupted() {
		select {
		case <-wctx.Done():
			return fmt.Errorf("task %s still %s after %s", task.ID, task.Status.State, *timeout)
		case <-tick.C:
		}
		if task, err = c.GetTask(wctx, &a2a.GetTaskRequest{ID: task.ID}); err != nil {
			return err
		}
	}
	if task.Status.State == a2a.TaskStateInputRequired {
		showQuestion(stdout, task)
		return errReported{3}
	}
	if task.Status.State == a2a.TaskStateCompleted {
		if a, ok := task.Artifact("response"); ok {
			fmt.Fprintln(stdout, a.Text())
			fmt.Fprintf(stderr, "(to continue this conversation: mur send --context %s TEXT)\n", task.ContextID)
			return nil
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
	fs := newFlags("tasks", "mur tasks [--door URL | --member NAME --roster FILE] [--state STATE]", stderr)
	var t target
	t.register(fs, getenv)
	state := fs.String("state", "", "only tasks in this state, e.g. TASK_STATE_COMPLETED")
	limit := fs.Int("limit", 50, "how many tasks to show, newest first (1-100)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	c, err := t.client()
	if err != nil {
		return err
	}
	size := *limit
	res, err := c.ListTasks(ctx, &a2a.ListTasksRequest{Status: a2a.TaskState(*state), PageSize: &size, HistoryLength: new(int)})
	if err != nil {
		return err
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
func showQuestion(w io.Writer, task *a2a.Task) {
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
		fmt.Fprintf(w, "answer: mur send --task %s --wait approve   (or: deny REASON)\n", task.ID)
		return
	}
	fmt.Fprintf(w, "answer: mur send --task %s --wait 'YOUR ANSWER'\n", task.ID)
}
