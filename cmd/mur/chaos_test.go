package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/store"
)

// The chaos test's knobs. Flags, as go test's own are, so that a run names them on its command line:
// go test ./cmd/mur -run TestChaos -chaos.kills=200 -chaos.seed=42.
var (
	chaosKills   = flag.Int("chaos.kills", envInt("MUR_CHAOS_KILLS", 3), "SIGKILLs of the chaos test's formation (env MUR_CHAOS_KILLS)")
	chaosSeed    = flag.Uint64("chaos.seed", uint64(envInt("MUR_CHAOS_SEED", 0)), "seed of the chaos test's choices; 0 picks one, which the test prints (env MUR_CHAOS_SEED)")
	chaosClients = flag.Int("chaos.clients", envInt("MUR_CHAOS_CLIENTS", 6), "concurrent clients of the chaos test (env MUR_CHAOS_CLIENTS)")
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// The chaos formation: lead, an agent on the script driver, answers "hello …" itself and hands
// "ask worker: …" to worker with call-member; worker, a script capsule, answers every task, taking a
// little while for "slow …". Both queue what arrives while they are busy, up to a bound, and reject the
// rest.
const (
	chaosRoster = `formation: chaos
entry: lead
members:
  - {name: lead, capsule: ./lead, listen: '127.0.0.1:0'}
  - {name: worker, capsule: ./worker, listen: '127.0.0.1:0'}
reach:
  - {from: lead, to: [worker]}
`
	chaosLead = `name: lead
inference:
  driver: local
  choices:
    local: {driver: script, script: script.yaml}
capabilities:
  network: {allow: [localhost]}
lifecycle:
  delegation_deadline_secs: 60
task_acceptance: queue
queue_size: 8
`
	chaosLeadScript = `rules:
  - match: '^ask worker: (?P<q>.+)$'
    turns:
      - call: [{tool: call-member, input: {member: worker, task: '{{.q}}'}}]
      - say: 'waiting for worker'
      - say: 'worker says: {{(index .answers 0).output}}'
  - match: ''
    turns:
      - say: 'lead heard: {{.task}}'
`
	chaosWorker = `name: worker
script:
  command: [sh, -c, 'read -r line; case "$line" in slow*) sleep 0.2 ;; esac; echo "worker did: $line"']
task_acceptance: queue
queue_size: 16
`
)

// chaosTask is a task a door acknowledged: the client got its id back.
type chaosTask struct {
	member string
	id     a2a.TaskID
	text   string
	epoch  int           // the run of the formation that acknowledged it
	state  a2a.TaskState // as last seen: at the acknowledgement, then after each check
}

// chaosCounts are what the test reports.
type chaosCounts struct {
	requests, acknowledged, lost           int
	completed, completedByCall, rejected   int
	canceled, failedByRestart, failedOther int
	leftRunningAtKill, checkedAgain        int
	rejectedNotKept                        int // rejections a kill took before they were kept
}

// formationProc is one run of `mur run`: the process and its doors' URLs by member.
type formationProc struct {
	cmd  *exec.Cmd
	urls map[string]string
	done chan struct{} // closed once cmd.Wait has returned
	hc   *http.Client  // for the checks; its connections end with the process
}

// client returns an operator's client of the named member's door.
func (p *formationProc) client(name string) *a2a.Client {
	return a2a.NewClient(p.urls[name]+"/a2a", "op", p.hc)
}

// startChaosFormation runs this test binary as `mur run` on the roster and data directory and waits until
// every member's door is open. stderr collects the formation's log.
func startChaosFormation(t *testing.T, rosterPath, dataDir string, stderr io.Writer, members int) *formationProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "run", "--roster", rosterPath, "--data-dir", dataDir, "--log-level", "warn")
	cmd.Env = append(os.Environ(), "MUR_TEST_AS_MUR=1", "MUR_OPERATOR_TOKEN=op", "MUR_FORMATION_TOKEN=fm",
		"MUR_RECORDS_DIR="+filepath.Join(dataDir, "records"))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	p := &formationProc{cmd: cmd, urls: map[string]string{}, done: make(chan struct{}),
		hc: &http.Client{Transport: tr, Timeout: 60 * time.Second}}
	ready := make(chan map[string]string, 1)
	go func() {
		re := regexp.MustCompile(`^\s+(\S+)\s+(http://\S+)/a2a$`)
		urls := map[string]string{}
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil && len(urls) < members {
				urls[m[1]] = m[2]
				if len(urls) == members {
					ready <- urls
				}
			}
		}
		close(ready)
		cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.done
		tr.CloseIdleConnections()
	})
	select {
	case urls, ok := <-ready:
		if !ok {
			t.Fatal("the formation exited before opening its doors")
		}
		p.urls = urls
		return p
	case <-time.After(120 * time.Second):
		t.Fatal("the formation did not open its doors within 120 s")
	}
	return nil
}

// kill SIGKILLs the formation and waits for it to be gone.
func (p *formationProc) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatal("the formation did not die within 60 s of SIGKILL")
	}
}

// TestChaos runs the chaos formation under load from concurrent clients, kills it with SIGKILL at
// random moments and restarts it on the same data directory. After every restart, every task a door
// acknowledged is there and in a terminal state: a task acknowledged as ended keeps its state, and
// one that had not ended was ended failed with member.RestartMessage; neither member holds a task
// that is not terminal. It reports the counts with a summary line.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("the chaos test starts and kills formations; skipped with -short")
	}
	seed := *chaosSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("chaos: seed %d, %d kills, %d clients (replay with -chaos.seed=%d)", seed, *chaosKills, *chaosClients, seed)
	rng := rand.New(rand.NewPCG(seed, 0))

	root := t.TempDir()
	for path, body := range map[string]string{
		"roster.yaml":        chaosRoster,
		"lead/murmur.yaml":   chaosLead,
		"lead/script.yaml":   chaosLeadScript,
		"worker/murmur.yaml": chaosWorker,
	} {
		p := filepath.Join(root, path)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rosterPath, dataDir := filepath.Join(root, "roster.yaml"), filepath.Join(root, "data")
	logPath := filepath.Join(root, "formation.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	t.Cleanup(func() {
		if t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil {
				t.Logf("the formation's log (last 4000 bytes):\n%s", b[max(0, len(b)-4000):])
			}
		}
	})

	var counts chaosCounts
	var acked []*chaosTask
	start := time.Now()
	proc := startChaosFormation(t, rosterPath, dataDir, logFile, 2)
	for epoch := 1; epoch <= *chaosKills; epoch++ {
		load := time.Duration(100+rng.IntN(1400)) * time.Millisecond
		got := runLoad(t, proc, epoch, *chaosClients, rng.Uint64(), load, &counts)
		for _, task := range got {
			if !task.state.Terminal() {
				counts.leftRunningAtKill++
			}
		}
		acked = append(acked, got...)
		proc = startChaosFormation(t, rosterPath, dataDir, logFile, 2)
		checkAfterRestart(t, proc, acked, epoch, rng, &counts)
	}
	// Once more over everything, then a clean stop.
	for _, task := range acked {
		checkTask(t, proc, task, &counts)
	}
	for _, task := range acked {
		switch task.state {
		case a2a.TaskStateCompleted:
			counts.completed++
			if strings.HasPrefix(task.text, "ask worker: ") {
				counts.completedByCall++
			}
		case a2a.TaskStateRejected:
			counts.rejected++
		case a2a.TaskStateCanceled:
			counts.canceled++
		}
	}
	proc.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-proc.done:
		if err := proc.cmd.ProcessState; err != nil && !err.Success() {
			t.Errorf("mur run after SIGTERM: %v, want exit 0", err)
		}
	case <-time.After(60 * time.Second):
		t.Error("mur run did not stop within 60 s of SIGTERM")
	}
	c := counts
	t.Logf("chaos summary: seed %d, %d kills and restarts in %v; %d requests; %d tasks acknowledged (%d last seen unfinished before their kill): "+
		"%d completed (%d of them through lead's call to worker), %d rejected (busy), %d canceled, %d failed by restart, %d failed otherwise; "+
		"%d sends unacknowledged (the formation was killed under them); %d checks of acknowledged tasks after restarts; %d rejections taken by a kill before they were kept",
		seed, *chaosKills, time.Since(start).Round(time.Second), c.requests, c.acknowledged, c.leftRunningAtKill,
		c.completed, c.completedByCall, c.rejected, c.canceled, c.failedByRestart, c.failedOther, c.lost, c.checkedAgain, c.rejectedNotKept)
}

// runLoad runs clients against the formation until it is killed after load, and returns the tasks its
// doors acknowledged.
func runLoad(t *testing.T, proc *formationProc, epoch, clients int, seed uint64, load time.Duration, counts *chaosCounts) []*chaosTask {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	tr := &http.Transport{MaxIdleConnsPerHost: clients}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 120 * time.Second}
	lead := a2a.NewClient(proc.urls["lead"]+"/a2a", "op", hc)
	worker := a2a.NewClient(proc.urls["worker"]+"/a2a", "op", hc)

	var mu sync.Mutex
	var acked []*chaosTask
	// record counts a request and runs ok under mu if it got an answer; it reports whether the client
	// goes on. A refusal fails the test; a lost connection means the formation was killed under it.
	record := func(send bool, ok func() error) bool {
		mu.Lock()
		defer mu.Unlock()
		counts.requests++
		err := ok()
		var rpcErr *a2a.Error
		switch {
		case err == nil:
			return true
		case errors.As(err, &rpcErr):
			t.Errorf("the door refused a request: %v", err)
		case send:
			counts.lost++
		}
		return false
	}
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(c)))
			for n := 0; ctx.Err() == nil; n++ {
				name, client, text := "lead", lead, fmt.Sprintf("hello %d.%d.%d", epoch, c, n)
				switch r := rng.IntN(10); {
				case r < 3:
					text = fmt.Sprintf("ask worker: job %d.%d.%d", epoch, c, n)
				case r < 5:
					name, client, text = "worker", worker, fmt.Sprintf("job %d.%d.%d", epoch, c, n)
				case r < 6:
					name, client, text = "worker", worker, fmt.Sprintf("slow %d.%d.%d", epoch, c, n)
				}
				immediately := rng.IntN(2) == 0
				res, err := client.SendMessage(ctx, &a2a.SendMessageRequest{
					Message:       &a2a.Message{MessageID: a2a.MessageID(text), Role: a2a.RoleUser, Parts: []a2a.Part{a2a.TextPart(text)}},
					Configuration: &a2a.SendMessageConfig{ReturnImmediately: immediately},
				})
				var task *chaosTask
				if !record(true, func() error {
					if err != nil {
						return err
					}
					if !immediately && !res.Task.Status.State.Terminal() {
						t.Errorf("a blocking SendMessage %q to %s answered a task in %s", text, name, res.Task.Status.State)
					}
					counts.acknowledged++
					task = &chaosTask{member: name, id: res.Task.ID, text: text, epoch: epoch, state: res.Task.Status.State}
					acked = append(acked, task)
					return nil
				}) {
					return
				}
				if !immediately || res.Task.Status.State.Terminal() {
					continue
				}
				// Now and then the client changes its mind; otherwise it gives the member a moment.
				if rng.IntN(5) > 0 {
					time.Sleep(time.Duration(rng.IntN(50)) * time.Millisecond)
					continue
				}
				got, err := client.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.id})
				if errors.Is(err, a2a.ErrTaskNotCancelable) {
					continue // it ended first
				}
				if !record(false, func() error {
					if err != nil {
						return err
					}
					if got.Status.State != a2a.TaskStateCanceled {
						t.Errorf("CancelTask %s (%q on %s) answered a task in %s", task.id, task.text, name, got.Status.State)
					}
					task.state = got.Status.State
					return nil
				}) {
					return
				}
			}
		})
	}
	select {
	case <-time.After(load):
	case <-proc.done:
		t.Errorf("the formation exited by itself during epoch %d", epoch)
	}
	proc.kill(t)
	stop()
	wg.Wait()
	return acked
}

// checkAfterRestart checks, right after a restart and before any new work: every task acknowledged
// in the run just killed, a sample of the older ones, that no member holds a task that has not ended,
// and that each member holds at least the tasks acknowledged for it.
func checkAfterRestart(t *testing.T, proc *formationProc, acked []*chaosTask, epoch int, rng *rand.Rand, counts *chaosCounts) {
	t.Helper()
	var older []*chaosTask
	for _, task := range acked {
		if task.epoch == epoch {
			checkTask(t, proc, task, counts)
		} else {
			older = append(older, task)
		}
	}
	rng.Shuffle(len(older), func(i, j int) { older[i], older[j] = older[j], older[i] })
	for _, task := range older[:min(len(older), 20)] {
		checkTask(t, proc, task, counts)
	}
	ctx := context.Background()
	for name := range proc.urls {
		c := proc.client(name)
		for _, state := range []a2a.TaskState{a2a.TaskStateSubmitted, a2a.TaskStateWorking, a2a.TaskStateInputRequired, a2a.TaskStateAuthRequired} {
			page, err := c.ListTasks(ctx, &a2a.ListTasksRequest{Status: state, HistoryLength: new(int)})
			if err != nil {
				t.Fatalf("after restart %d, ListTasks on %s: %v", epoch, name, err)
			}
			if page.TotalSize != 0 {
				t.Errorf("after restart %d, %s holds %d task(s) in %s, e.g. %s: the restart ends every task that had not ended",
					epoch, name, page.TotalSize, state, page.Tasks[0].ID)
			}
		}
		one := 1
		page, err := c.ListTasks(ctx, &a2a.ListTasksRequest{PageSize: &one, HistoryLength: new(int)})
		if err != nil {
			t.Fatalf("after restart %d, ListTasks on %s: %v", epoch, name, err)
		}
		want := 0
		for _, task := range acked {
			if task.member == name && task.state != a2a.TaskStateRejected {
				want++
			}
		}
		if page.TotalSize < want {
			t.Errorf("after restart %d, %s holds %d tasks, fewer than the %d it acknowledged", epoch, name, page.TotalSize, want)
		}
	}
}

// checkTask reads an acknowledged task from its member and checks that it is there and ended, in the
// state it was last seen in if that had ended, else failed by the restart (or ended before the kill).
func checkTask(t *testing.T, proc *formationProc, task *chaosTask, counts *chaosCounts) {
	t.Helper()
	counts.checkedAgain++
	got, err := proc.client(task.member).GetTask(context.Background(), &a2a.GetTaskRequest{ID: task.id, HistoryLength: new(int)})
	if err != nil && task.state == a2a.TaskStateRejected && errors.Is(err, a2a.ErrTaskNotFound) {
		// A rejection is answered at once and kept later, in a batch without an fsync of its own (docs/security.md,
		// floods; docs/task-store.md), so a kill may take it; an admitted task is never lost.
		counts.rejectedNotKept++
		return
	}
	if err != nil {
		t.Errorf("task %s (%q, acknowledged by %s in run %d, last seen %s) is lost: %v", task.id, task.text, task.member, task.epoch, task.state, err)
		return
	}
	state := got.Status.State
	switch {
	case !state.Terminal():
		t.Errorf("task %s (%q on %s) is %s after a restart, want an ended state", task.id, task.text, task.member, state)
	case task.state.Terminal() && state != task.state:
		t.Errorf("task %s (%q on %s) was acknowledged %s and came back %s", task.id, task.text, task.member, task.state, state)
	case !task.state.Terminal() && state == a2a.TaskStateFailed:
		if msg := got.Status.Message; msg != nil && msg.Text() == store.RestartMessage {
			counts.failedByRestart++
		} else {
			counts.failedOther++
			t.Logf("task %s (%q on %s) failed, not by the restart: %+v", task.id, task.text, task.member, got.Status.Message)
		}
	}
	if state == a2a.TaskStateCompleted {
		if a, _ := got.Artifact("response"); a.Text() != chaosAnswer(task.member, task.text) {
			t.Errorf("task %s (%q on %s) completed with %q, want %q", task.id, task.text, task.member, a.Text(), chaosAnswer(task.member, task.text))
		}
	}
	task.state = state
}

// chaosAnswer is the answer of a completed task of the chaos formation.
func chaosAnswer(member, text string) string {
	if member == "worker" {
		return "worker did: " + text
	}
	if q, ok := strings.CutPrefix(text, "ask worker: "); ok {
		return "worker says: worker did: " + q
	}
	return "lead heard: " + text
}
