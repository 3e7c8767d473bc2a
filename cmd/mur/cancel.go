package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
)

// cmdCancel cancels one task, and with --tree the tasks it caused on other members: mur cancel [target]
// [--tree] TASK.
//
// A task a member gave another with call-member is the callee's own task: cancelling the caller's
// leaves it running (SPEC), and only the operator's explicit --tree cancels it too. Such a task is found
// at each member the roster lets the caller reach, among the tasks that have not ended: its caller is
// the member, and its first message's metadata.murmur.caller_task_id the task.
func cmdCancel(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("cancel", "mur cancel [--roster FILE [--member NAME] | --door URL] [--tree] TASK", stderr)
	var t target
	t.register(fs, getenv)
	tree := fs.Bool("tree", false, "cancel too the tasks TASK caused on other members (call-member), and theirs, which otherwise keep running; needs --roster")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("name one task: mur cancel [--roster FILE | --door URL] [--tree] TASK (mur tasks lists a member's tasks)")
	}
	id := a2a.TaskID(fs.Arg(0))
	c, err := t.connect()
	if err != nil {
		return err
	}
	defer c.close()
	if *tree && c.r == nil {
		return usagef("--tree finds the tasks %s caused at the other members of its formation: name the formation with --roster FILE (and --member NAME) instead of --door", id)
	}
	d, _, err := c.findTask(ctx, id)
	if err != nil {
		return err
	}
	ended, err := c.cancelOne(ctx, d, id, stdout)
	if err != nil {
		return err
	}
	endedErr := error(nil)
	if ended {
		endedErr = errReported{1}
	}
	if c.r == nil {
		fmt.Fprintln(stdout, "Tasks it gave other members with call-member keep running: a member's task is its own. "+
			"To find and cancel them too, name the formation with --roster (and --member) instead of --door, and add --tree.")
		return endedErr
	}
	if len(c.r.Reachable(d.member)) == 0 {
		return endedErr // a member that may call no other causes no task elsewhere
	}
	if !*tree {
		live, err := c.caused(ctx, d.member, id)
		if err != nil {
			return err
		}
		if len(live) == 0 {
			fmt.Fprintln(stdout, "It caused no task that still runs on another member (a task it gave another member with call-member would keep running; --tree cancels those too).")
			return endedErr
		}
		fmt.Fprintln(stdout, "The tasks it gave other members with call-member keep running, since a member's task is its own:")
		for _, k := range live {
			fmt.Fprintf(stdout, "  %s %s %s\n", k.member, k.task.ID, stateWord(k.task.Status.State))
		}
		fmt.Fprintf(stdout, "Cancel them too: mur cancel%s --tree %s\n", c.flagsFor(d.member), id)
		return endedErr
	}
	canceled, failed := 0, []error{}
	queue := []callee{{member: d.member, task: &a2a.Task{ID: id}}}
	seen := map[a2a.TaskID]bool{id: true}
	for len(queue) > 0 {
		parent := queue[0]
		queue = queue[1:]
		kids, err := c.caused(ctx, parent.member, parent.task.ID)
		if err != nil {
			failed = append(failed, err)
			continue
		}
		for _, k := range kids {
			if seen[k.task.ID] {
				continue
			}
			seen[k.task.ID] = true
			kd, err := c.doorOf(k.member)
			if err != nil {
				failed = append(failed, err)
				continue
			}
			if _, err := c.cancelOne(ctx, kd, k.task.ID, stdout); err != nil {
				failed = append(failed, err)
				continue
			}
			canceled++
			queue = append(queue, k)
		}
	}
	fmt.Fprintf(stdout, "canceled %d task(s) %s caused on other members\n", canceled, id)
	if len(failed) > 0 {
		return errors.Join(failed...)
	}
	if ended && canceled == 0 {
		return errReported{1}
	}
	return nil
}

// cancelOne cancels task id at d and says how it went. ended reports that the task had already ended
// otherwise (nothing was canceled).
func (c *conn) cancelOne(ctx context.Context, d door, id a2a.TaskID, w io.Writer) (ended bool, err error) {
	task, err := d.client.CancelTask(ctx, &a2a.CancelTaskRequest{ID: id})
	if errors.Is(err, a2a.ErrTaskNotCancelable) {
		how := "ended"
		none := 0
		if t, gerr := d.client.GetTask(ctx, &a2a.GetTaskRequest{ID: id, HistoryLength: &none}); gerr == nil {
			how = "ended " + stateWord(t.Status.State)
		}
		fmt.Fprintf(w, "task %s at %s already %s: nothing to cancel\n", id, d.where(), how)
		return true, nil
	}
	if err != nil {
		return false, c.explain(d, fmt.Errorf("canceling task %s at %s: %w", id, d.where(), err))
	}
	fmt.Fprintf(w, "task %s at %s: %s\n", id, d.where(), stateWord(task.Status.State))
	return false, nil
}

// callee is a task a member's task caused on another member.
type callee struct {
	member string
	task   *a2a.Task
}

// liveStates are the states of a task that has not ended.
var liveStates = []a2a.TaskState{a2a.TaskStateSubmitted, a2a.TaskStateWorking, a2a.TaskStateInputRequired, a2a.TaskStateAuthRequired}

// caused returns the tasks that have not ended and that task id of member gave other members with
// call-member. A member whose door does not answer is an error naming it.
func (c *conn) caused(ctx context.Context, member string, id a2a.TaskID) ([]callee, error) {
	var out []callee
	for _, name := range c.r.Reachable(member) {
		d, err := c.doorOf(name)
		if err != nil {
			return nil, err
		}
		for _, st := range liveStates {
			page := ""
			for {
				size := a2a.MaxPageSize
				res, err := d.client.ListTasks(ctx, &a2a.ListTasksRequest{Status: st, PageSize: &size, PageToken: page})
				if err != nil {
					return nil, c.explain(d, fmt.Errorf("looking for the tasks %s caused at %s: %w", id, name, err))
				}
				for i := range res.Tasks {
					if t := &res.Tasks[i]; causedBy(t, member, id) {
						out = append(out, callee{member: name, task: t})
					}
				}
				if page = res.NextPageToken; page == "" {
					break
				}
			}
		}
	}
	return out, nil
}

// causedBy reports whether t is the task of a call-member that task id of member made: its caller is
// member, and the message that started it names id as the calling task.
func causedBy(t *a2a.Task, member string, id a2a.TaskID) bool {
	if caller, _ := ids.Get(ids.Murmur(t.Metadata), ids.MetaCaller).(string); caller != member || len(t.History) == 0 {
		return false
	}
	from, _ := ids.Get(ids.Murmur(t.History[0].Metadata), ids.MetaCallerTaskID).(string)
	return from == string(id)
}
