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

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	taskusage "github.com/murmur-run/murmur/member/usage"
)

// cmdGet shows one task: mur get [target] [--follow] [--save DIR] [--json] TASK.
func cmdGet(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("get", "mur get [--roster FILE [--member NAME] | --door URL] [--follow] [--save DIR] [--json] TASK", stderr)
	var t target
	t.register(fs, getenv)
	follow := fs.Bool("follow", false, "stream the task's progress until it ends or waits for its sender, then show its outcome as mur send --wait does")
	save := fs.String("save", "", "save the task's file artifacts into this folder")
	asJSON := fs.Bool("json", false, "print the task as the door answers GetTask (JSON, with its history)")
	timeout := fs.Duration("timeout", 10*time.Minute, "with --follow, how long to wait")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("name one task: mur get [--roster FILE | --door URL] TASK (mur tasks lists a member's tasks)")
	}
	id := a2a.TaskID(fs.Arg(0))
	if *asJSON && (*follow || *save != "") {
		return usagef("--json prints the task as it stands; leave out --follow and --save")
	}
	c, err := t.connect()
	if err != nil {
		return err
	}
	defer c.close()
	d, task, err := c.findTask(ctx, id)
	if err != nil {
		return err
	}
	if *asJSON {
		var raw json.RawMessage
		if err := d.client.Call(ctx, a2a.MethodGetTask, &a2a.GetTaskRequest{ID: id}, &raw); err != nil {
			return c.explain(d, err)
		}
		_, err := fmt.Fprintln(stdout, string(raw))
		return err
	}
	if *follow {
		wctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		if !task.Status.State.Terminal() && !task.Status.State.Interrupted() {
			p := &progress{w: stderr}
			err := c.stream(wctx, d, a2a.MethodSubscribeToTask, &a2a.SubscribeToTaskRequest{ID: id}, p.event)
			// A task that ended between the read and the subscription is refused (-32004): read it as it ended.
			if err != nil && !errors.Is(err, errStreamClosed) && !errors.Is(err, a2a.ErrUnsupportedOperation) && wctx.Err() == nil {
				fmt.Fprintf(stderr, "mur: following task %s: %v; waiting for it by polling instead\n", id, c.explain(d, err))
			}
		}
		if task, err = c.waitTask(wctx, d, id, *timeout); err != nil {
			return err
		}
		return c.showOutcome(wctx, d, task, *save, stdout, stderr)
	}
	c.printTask(stdout, d, task, getenv("MUR_TRACE_URL"))
	switch {
	case task.Status.State == a2a.TaskStateInputRequired:
		c.showQuestion(stdout, d, task)
	case !task.Status.State.Terminal():
		fmt.Fprintf(stderr, "(watch it: mur get%s --follow %s; stop it: mur cancel%s %s)\n", c.flagsFor(d.member), id, c.flagsFor(d.member), id)
	case task.Status.State == a2a.TaskStateCompleted:
		c.continueHint(stderr, d, task)
	}
	if *save != "" {
		return c.saveFiles(ctx, d, task, *save, stdout)
	}
	if files, _ := extras(task); len(files) > 0 {
		fmt.Fprintf(stderr, "(save its files: mur get%s --save %s %s)\n", c.flagsFor(d.member), id, id)
	}
	return nil
}

// printTask prints a task: where it is, its state, what it used, its trace (with its page in the trace
// UI of traceURL, MUR_TRACE_URL), its answer and every artifact.
func (c *conn) printTask(w io.Writer, d door, t *a2a.Task, traceURL string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "task\t%s\n", t.ID)
	if d.member != "" {
		fmt.Fprintf(tw, "member\t%s\n", d.member)
	} else {
		fmt.Fprintf(tw, "door\t%s\n", d.base)
	}
	state := stateWord(t.Status.State)
	if ts := t.Status.Timestamp; ts != nil {
		state += "  (since " + ts.Local().Format(time.DateTime) + ")"
	}
	fmt.Fprintf(tw, "state\t%s\n", state)
	fmt.Fprintf(tw, "context\t%s\n", t.ContextID)
	answer, hasAnswer := t.Artifact(responseArtifact)
	// A question is shown after the task, with the command that answers it.
	if m := t.Status.Message; m != nil && t.Status.State != a2a.TaskStateInputRequired && (!hasAnswer || m.Text() != answer.Text()) {
		fmt.Fprintf(tw, "status\t%s\n", indent(m.Text()))
	}
	printUsage(tw, t, traceURL)
	tw.Flush()
	if hasAnswer {
		fmt.Fprintf(w, "answer:\n%s\n", indent("  "+answer.Text()))
	}
	if len(t.Artifacts) == 0 {
		return
	}
	fmt.Fprintln(w, "artifacts:")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, a := range t.Artifacts {
		for _, p := range a.Parts {
			kind, what := "text", ""
			switch {
			case p.Text != nil:
				what = fmt.Sprintf("%d characters", len([]rune(*p.Text)))
			case p.Raw != nil:
				kind, what = "file", fmt.Sprintf("%s, %s inline", orUnknown(p.MediaType), size(int64(len(p.Raw))))
			case p.URL != "":
				kind, what = "file", fmt.Sprintf("%s, at %s", orUnknown(p.MediaType), p.URL)
			case p.Data != nil:
				kind, what = "data", cutLine(string(p.Data), 80)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", artifactName(a), kind, what)
		}
	}
	tw.Flush()
}

// indent indents every line of s after the first by two spaces.
func indent(s string) string { return strings.ReplaceAll(s, "\n", "\n  ") }

// printUsage prints the rows of what t used (metadata.murmur.usage): its own tokens and, when it caused
// other tasks, theirs and the sum; then the trace it ran in, with its page when traceURL names the trace
// UI's page of a trace by {trace_id}.
func printUsage(tw io.Writer, t *a2a.Task, traceURL string) {
	meta := ids.Murmur(t.Metadata)
	if u, ok := taskusage.Read(meta); ok {
		fmt.Fprintf(tw, "tokens\t%s (own)\n", tokensText(u.Self))
		if u.Tasks > 0 {
			fmt.Fprintf(tw, "\t%s (caused: %d task(s) and sub-session(s))\n", tokensText(u.Caused), u.Tasks)
			fmt.Fprintf(tw, "\t%s (in all)\n", tokensText(u.Total))
		}
	}
	if id, _ := ids.Get(meta, ids.MetaTraceID).(string); id != "" {
		if traceURL != "" {
			id += "  " + strings.ReplaceAll(traceURL, "{trace_id}", id)
		}
		fmt.Fprintf(tw, "trace\t%s\n", id)
	}
}

// tokensText is a task's tokens in a line: input, output, what the cache read and wrote, and the calls.
func tokensText(t taskusage.Tokens) string {
	s := fmt.Sprintf("%d in, %d out", t.Input, t.Output)
	if t.Cached > 0 || t.CacheWrite > 0 {
		s += fmt.Sprintf(", %d cached, %d written to the cache", t.Cached, t.CacheWrite)
	}
	s += fmt.Sprintf("; %d inference call(s)", t.Calls)
	if t.Unreported > 0 {
		s += fmt.Sprintf(", %d of them reported none", t.Unreported)
	}
	return s
}
