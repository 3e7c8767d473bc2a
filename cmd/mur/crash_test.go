package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member"
	"github.com/murmur-run/murmur/member/store"
)

// A task whose text starts with "quick" is answered at once; any other waits for the file "go".
const crashCapsule = `name: solo
script:
  command: [sh, -c, 'read -r line; case "$line" in quick*) ;; *) while [ ! -e "$MUR_CAPSULE_DIR/go" ]; do sleep 0.01; done ;; esac; echo "done: $line"']
task_acceptance: queue
`

type memberProc struct {
	cmd      *exec.Cmd
	url      string
	profiles chan string // the --debug-listen URL it prints after its door's (capacity 1)
}

// startMember runs this test binary as `mur member` (with env added to its environment) and waits for
// its door's URL.
func startMember(t *testing.T, rosterPath, dataDir string, env ...string) *memberProc {
	t.Helper()
	return startMemberFlags(t, rosterPath, dataDir, nil, env...)
}

// startMemberFlags is startMember with flags added to its command line.
func startMemberFlags(t *testing.T, rosterPath, dataDir string, flags []string, env ...string) *memberProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"member", "--roster", rosterPath, "--name", "solo", "--listen", "127.0.0.1:0", "--data-dir", dataDir}, flags...)...)
	cmd.Env = append(os.Environ(), "MUR_TEST_AS_MUR=1", "MUR_OPERATOR_TOKEN=op", "MUR_FORMATION_TOKEN=fm",
		"MUR_RECORDS_DIR="+filepath.Join(dataDir, "records"))
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	urls, profiles := make(chan string, 1), make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`^\s+solo\s+(http://\S+)/a2a$`)
		reProfiles := regexp.MustCompile(`^\s+profiles\s+(http://\S+)$`)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				urls <- m[1]
			}
			if m := reProfiles.FindStringSubmatch(sc.Text()); m != nil {
				profiles <- m[1]
			}
		}
		close(urls)
		close(profiles)
	}()
	select {
	case u, ok := <-urls:
		if !ok {
			t.Fatal("the member exited before opening its door")
		}
		return &memberProc{cmd: cmd, url: u, profiles: profiles}
	case <-time.After(60 * time.Second):
		t.Fatal("the member did not open its door")
	}
	return nil
}

// soloFormation writes a formation of one member, solo, whose capsule is capsuleYAML, in a temporary
// directory, and returns its roster, capsule directory and data directory.
func soloFormation(t *testing.T, formation, capsuleYAML string) (rosterPath, capsule, dataDir string) {
	t.Helper()
	root := t.TempDir()
	capsule = filepath.Join(root, "solo")
	os.MkdirAll(capsule, 0o755)
	os.WriteFile(filepath.Join(capsule, "murmur.yaml"), []byte(capsuleYAML), 0o644)
	rosterPath = filepath.Join(root, "roster.yaml")
	os.WriteFile(rosterPath, []byte("formation: "+formation+"\nmembers:\n  - name: solo\n    capsule: ./solo\n"), 0o644)
	return rosterPath, capsule, filepath.Join(root, "data")
}

func TestAcknowledgedTasksSurviveSIGKILL(t *testing.T) {
	rosterPath, capsule, dataDir := soloFormation(t, "crash", crashCapsule)
	t.Cleanup(func() { os.WriteFile(filepath.Join(capsule, "go"), nil, 0o644) })
	ctx := context.Background()

	first := startMember(t, rosterPath, dataDir)
	c := a2a.NewClient(first.url+"/a2a", "op", nil)
	send := func(c *a2a.Client, text string, immediately bool) *a2a.Task {
		t.Helper()
		res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{
			Message:       &a2a.Message{MessageID: a2a.MessageID("m-" + text), Role: a2a.RoleUser, Parts: []a2a.Part{a2a.TextPart(text)}},
			Configuration: &a2a.SendMessageConfig{ReturnImmediately: immediately},
		})
		if err != nil {
			t.Fatalf("SendMessage %q: %v", text, err)
		}
		return res.Task
	}
	var completed []*a2a.Task
	for i := range 3 {
		task := send(c, fmt.Sprintf("quick %d", i), false)
		if task.Status.State != a2a.TaskStateCompleted {
			t.Fatalf("quick task %d: %s", i, task.Status.State)
		}
		completed = append(completed, task)
	}
	running := send(c, "slow", true)
	queued := send(c, "queued behind slow", true)
	for deadline := time.Now().Add(30 * time.Second); ; {
		got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: running.ID})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.State == a2a.TaskStateWorking {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("slow task never started: %s", got.Status.State)
		}
		time.Sleep(10 * time.Millisecond)
	}

	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first.cmd.Wait()

	second := startMember(t, rosterPath, dataDir)
	c2 := a2a.NewClient(second.url+"/a2a", "op", nil)
	for _, want := range completed {
		got, err := c2.GetTask(ctx, &a2a.GetTaskRequest{ID: want.ID})
		if err != nil {
			t.Fatalf("completed task %s lost in the crash: %v", want.ID, err)
		}
		a, _ := got.Artifact("response")
		wa, _ := want.Artifact("response")
		if got.Status.State != a2a.TaskStateCompleted || a.Text() != wa.Text() {
			t.Errorf("completed task %s came back %s with %q, want completed with %q", want.ID, got.Status.State, a.Text(), wa.Text())
		}
	}
	for _, id := range []a2a.TaskID{running.ID, queued.ID} {
		got, err := c2.GetTask(ctx, &a2a.GetTaskRequest{ID: id})
		if err != nil {
			t.Fatalf("acknowledged task %s lost in the crash: %v", id, err)
		}
		if got.Status.State != a2a.TaskStateFailed || got.Status.Message == nil || got.Status.Message.Text() != store.RestartMessage {
			t.Errorf("interrupted task %s came back %s %+v, want failed with %q", id, got.Status.State, got.Status.Message, store.RestartMessage)
		}
	}
	page, err := c2.ListTasks(ctx, &a2a.ListTasksRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if page.TotalSize != 5 {
		t.Errorf("%d tasks after restart, want the 5 acknowledged", page.TotalSize)
	}
	// The restarted member takes new work.
	if task := send(c2, "quick after", false); task.Status.State != a2a.TaskStateCompleted {
		t.Errorf("after restart: %s", task.Status.State)
	}
}

func TestSIGTERMShutsDownCleanly(t *testing.T) {
	rosterPath, capsule, dataDir := soloFormation(t, "term", crashCapsule)
	t.Cleanup(func() { os.WriteFile(filepath.Join(capsule, "go"), nil, 0o644) })
	ctx := context.Background()

	p := startMember(t, rosterPath, dataDir)
	c := a2a.NewClient(p.url+"/a2a", "op", nil)
	res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{
		Message:       &a2a.Message{MessageID: a2a.MessageID(ids.New(ids.PrefixMessage)), Role: a2a.RoleUser, Parts: []a2a.Part{a2a.TextPart("slow")}},
		Configuration: &a2a.SendMessageConfig{ReturnImmediately: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	for {
		got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: res.Task.ID})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.State == a2a.TaskStateWorking {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("mur member after SIGTERM: %v, want exit 0", err)
	}
	again := startMember(t, rosterPath, dataDir)
	got, err := a2a.NewClient(again.url+"/a2a", "op", nil).GetTask(ctx, &a2a.GetTaskRequest{ID: res.Task.ID})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.State != a2a.TaskStateCanceled || got.Status.Message.Text() != member.ShutdownCancel {
		t.Errorf("a task in flight at SIGTERM came back %s %+v, want canceled with %q", got.Status.State, got.Status.Message, member.ShutdownCancel)
	}
}
