package harness

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

// execStarter starts a program unconfined, in a process group of its own: enough to test the runner;
// the session's confinement is the sandbox's and is tested with it.
type execStarter struct{ started []Program }

type execProc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func (p *execProc) Done() <-chan struct{} { return p.done }
func (p *execProc) ExitCode() int {
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return p.cmd.ProcessState.ExitCode()
}
func (p *execProc) Kill() { syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) }

func (s *execStarter) Start(p Program) (Process, error) {
	s.started = append(s.started, p)
	cmd := exec.Command(p.Command[0], p.Command[1:]...)
	cmd.Env = p.Env
	cmd.Stdout, cmd.Stderr = p.Stdout, p.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	pr := &execProc{cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(pr.done) }()
	return pr, nil
}

// shRunner runs script under sh; the prompt arrives as $1 ({prompt} placed), the session as $2.
func shRunner(d Dialect, script string) (*Runner, *execStarter) {
	st := &execStarter{}
	return &Runner{Command: []string{"/bin/sh", "-c", script, "harness", "{prompt}"}, Resume: []string{"{session}"},
		Dialect: d, MCPConfig: "/run/mcp.json", Env: []string{"A=1"}, Starter: st}, st
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRunArgs(t *testing.T) {
	r := &Runner{Command: []string{"claude", "-p", "--mcp-config", "{mcp_config}"}, Resume: []string{"--resume", "{session}"}, MCPConfig: "/x/mcp.json"}
	if diff := cmp.Diff([]string{"claude", "-p", "--mcp-config", "/x/mcp.json", "hello"}, r.Args("hello", "")); diff != "" {
		t.Errorf("fresh (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"claude", "-p", "--mcp-config", "/x/mcp.json", "--resume", "abc", "answers"}, r.Args("answers", "abc")); diff != "" {
		t.Errorf("resume (-want +got):\n%s", diff)
	}
	r.Command, r.Instructions = []string{"h", "--system", "{instructions}", "--prompt={prompt}"}, "Be brief."
	if diff := cmp.Diff([]string{"h", "--system", "Be brief.", "--prompt=p", "--resume", "abc"}, r.Args("p", "abc")); diff != "" {
		t.Errorf("placed (-want +got):\n%s", diff)
	}
}

func TestRunAnswers(t *testing.T) {
	r, st := shRunner(MurmurJSONL, `echo '{"type":"turn","usage":{"input":3,"output":1}}'; echo "prompt=$1 resume=$2 cfg=$MUR_MCP_CONFIG a=$A" >&2; printf '{"type":"answer","text":"%s","session":"h-7"}\n' "$1"`)
	var kinds []Kind
	res, err := r.Run(context.Background(), "the task", "", func(e Event) { kinds = append(kinds, e.Kind) })
	if err != nil {
		t.Fatal(err)
	}
	if res.Answer != "the task" || res.Session != "h-7" || !res.Answered || res.Events != 3 || res.Garbage != 0 {
		t.Errorf("result: %+v", res)
	}
	if diff := cmp.Diff([]Kind{KindTurn, KindSession, KindAnswer}, kinds); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if res.Stderr != "prompt=the task resume= cfg=/run/mcp.json a=1\n" {
		t.Errorf("stderr: %q", res.Stderr)
	}
	// A resume carries the session id and the continuation as the prompt.
	res, err = r.Run(context.Background(), "the answers", "h-7", nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Stderr != "prompt=the answers resume=h-7 cfg=/run/mcp.json a=1\n" {
		t.Errorf("resume stderr: %q", res.Stderr)
	}
	if got := st.started[1].Command; got[len(got)-1] != "h-7" {
		t.Errorf("resume args: %q", got)
	}
}

func TestRunFailures(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		want         error
		msg          string
	}{
		{"exits non-zero before any event", `echo 'no credentials' >&2; exit 3`, ErrNoEvent,
			"the harness /bin/sh exited with status 3 before reporting any event; its stderr ends: no credentials"},
		{"garbage then non-zero", `echo 'panic: boom'; exit 2`, ErrNoEvent,
			"the harness /bin/sh exited with status 2 before reporting any event; 1 line(s) of its output were not murmur-jsonl events"},
		{"garbage, exit 0, no answer", `echo hello; echo '{"type":"turn"}'`, ErrNoAnswer,
			"the harness /bin/sh exited without an answer event (dialect murmur-jsonl); 1 line(s) of its output were not murmur-jsonl events"},
		{"killed mid-task", `echo '{"type":"turn"}'; kill -9 $$`, ErrExit,
			"the harness /bin/sh was killed by signal 9 (killed) after 1 event(s)"},
		{"non-zero after events", `echo '{"type":"turn"}'; echo '{"type":"answer","text":"x"}'; exit 1`, ErrExit,
			"the harness /bin/sh exited with status 1 after 2 event(s)"},
		{"stream cut mid-line", `printf '{"type":"answer","te'`, ErrNoAnswer,
			"the harness /bin/sh exited without an answer event (dialect murmur-jsonl); 1 line(s) of its output were not murmur-jsonl events"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := shRunner(MurmurJSONL, tc.script)
			_, err := r.Run(context.Background(), "p", "", nil)
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			if !strings.HasSuffix(err.Error(), tc.msg) {
				t.Errorf("message:\n got %s\nwant …%s", err, tc.msg)
			}
		})
	}
}

func TestRunReportedError(t *testing.T) {
	r, _ := shRunner(ClaudeStreamJSON, `echo '{"type":"result","subtype":"error_during_execution","is_error":true,"result":"API Error: 401"}'`)
	_, err := r.Run(context.Background(), "p", "", nil)
	if !errors.Is(err, ErrReportedError) || err.Error() != "the harness reported an error: API Error: 401" {
		t.Errorf("error: %v", err)
	}
}

// A harness that never exits is ended with its whole tree when the context ends.
func TestRunNeverExits(t *testing.T) {
	r, _ := shRunner(MurmurJSONL, `echo '{"type":"turn"}'; sleep 1000 & sleep 1000; wait`)
	ctx, cancel := context.WithCancel(context.Background())
	res, err := r.Run(ctx, "p", "", func(e Event) {
		if e.Kind == KindTurn {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v", err)
	}
	if res.ExitCode != 128+9 || res.Events != 1 {
		t.Errorf("result: %+v", res)
	}
}

func TestStartFails(t *testing.T) {
	r := &Runner{Command: []string{"/nonexistent/harness"}, Dialect: MurmurJSONL, Starter: &execStarter{}}
	_, err := r.Run(context.Background(), "p", "", nil)
	if err == nil || !strings.HasPrefix(err.Error(), "starting the harness /nonexistent/harness: ") {
		t.Errorf("error: %v", err)
	}
}

func TestResolveEnv(t *testing.T) {
	env := map[string]string{"ANTHROPIC_API_KEY": "sk-1"}
	got := ResolveEnv([]string{"ANTHROPIC_API_KEY", "MISSING", "MODE=fast"}, func(k string) string { return env[k] })
	if diff := cmp.Diff([]string{"ANTHROPIC_API_KEY=sk-1", "MODE=fast"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
