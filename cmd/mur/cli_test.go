package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/murmur-run/murmur/member/driver"
)

func noEnv(string) string { return "" }

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestVersionHelpAndUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{[]string{"version"}, 0, "mur " + version, ""},
		{[]string{"--help"}, 0, "mur run --roster FILE", ""},
		{nil, 2, "", "no command given"},
		{[]string{"frobnicate"}, 2, "", `unknown command "frobnicate"`},
		{[]string{"run"}, 2, "", "--roster is required"},
		{[]string{"run", "--help"}, 0, "", "Usage: mur run --roster FILE"},
		{[]string{"run", "--bogus"}, 2, "", "flag provided but not defined: -bogus"},
		{[]string{"member", "--roster", "x.yaml"}, 2, "", "--name is required"},
		{[]string{"run", "--roster", "x.yaml", "--debug-listen", "0.0.0.0:6060"}, 2, "", "profiles are served on loopback only"},
		{[]string{"run", "--roster", "x.yaml", "--debug-listen", "6060"}, 2, "", "give a loopback address such as 127.0.0.1:6060"},
		{[]string{"run", "--roster", "x.yaml", "--max-streams", "0"}, 2, "", "--max-streams 0: give how many streams one caller may hold open on a door, 1 or more"},
		{[]string{"send"}, 2, "", "give the task text"},
		{[]string{"send", "hello"}, 2, "", "say which door to talk to"},
		{[]string{"check"}, 2, "", "--roster is required"},
		{[]string{"run", "--roster", "/nonexistent/roster.yaml"}, 2, "", "/nonexistent/roster.yaml"},
		{[]string{"export"}, 2, "", "name the format: mur export compose"},
		{[]string{"export", "--help"}, 0, "mur export compose --roster FILE", ""},
		{[]string{"export", "helm"}, 2, "", `unknown export format "helm"`},
		{[]string{"export", "compose"}, 2, "", "--roster is required"},
		{[]string{"export", "prometheus", "--monitoring"}, 2, "", "flag provided but not defined: -monitoring"},
		{[]string{"export", "k8s", "--roster", "/nonexistent/roster.yaml"}, 2, "", "/nonexistent/roster.yaml"},
	} {
		var out, errb bytes.Buffer
		err := run(context.Background(), tc.args, noEnv, &out, &errb)
		stderr := errb.String()
		code := exitCodeFor(err, &errb)
		stderr = errb.String()
		if code != tc.code {
			t.Errorf("mur %v: exit %d, want %d (err %v)", tc.args, code, tc.code, err)
		}
		if !strings.Contains(out.String(), tc.stdout) {
			t.Errorf("mur %v: stdout %q lacks %q", tc.args, out.String(), tc.stdout)
		}
		if !strings.Contains(stderr, tc.stderr) {
			t.Errorf("mur %v: stderr %q lacks %q", tc.args, stderr, tc.stderr)
		}
	}
}

// exitCodeFor is exitCode writing to a buffer.
func exitCodeFor(err error, w *bytes.Buffer) int {
	f, _ := os.CreateTemp("", "stderr")
	defer os.Remove(f.Name())
	code := exitCode(err, f)
	f.Close()
	b, _ := os.ReadFile(f.Name())
	w.Write(b)
	return code
}

func TestCheckTheHelloExample(t *testing.T) {
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"check", "--roster", "../../deploy/examples/hello/roster.yaml"}, noEnv, &out, &errb)
	if err != nil {
		t.Fatalf("mur check on hello: %v\n%s%s", err, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "2 member(s), 0 error(s), 0 warning(s)") {
		t.Errorf("check output: %s", out.String())
	}
}

func TestCheckReportsEveryProblemWithItsCode(t *testing.T) {
	driver.SkipUnlessModelDrivers(t)
	root := t.TempDir()
	write := func(rel, body string) {
		p := filepath.Join(root, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(body), 0o644)
	}
	write("roster.yaml", "formation: bad\nmembers:\n  - {name: lead, capsule: ./lead}\n  - {name: worker, capsule: ./worker}\nreach:\n  - {from: lead, to: [worker]}\n")
	write("lead/murmur.yaml", "name: lead\ninference:\n  driver: local\n  choices:\n    local: {driver: script}\n    gpt: {driver: openai, model: m, credential: env:MUR_TEST_UNSET_KEY}\ntools: [murmur/delegate-task]\n")
	write("worker/murmur.yaml", "name: worker\nscript: {command: [cat]}\nmax_turns: 3\n")
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"check", "--roster", filepath.Join(root, "roster.yaml")}, noEnv, &out, &errb)
	if code := exitCodeFor(err, &errb); code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
	for _, want := range []string{
		"E-CAP-013: member lead: " + filepath.Join(root, "lead", "murmur.yaml") + ": tools[0]: murmur/delegate-task: its tool name \"delegate-task\" is reserved",
		"W-RUN-008: member lead: may call worker at http://127.0.0.1:7102",
		"W-DRV-002: member lead: " + filepath.Join(root, "lead", "murmur.yaml") + ": driver choice gpt: credential env:MUR_TEST_UNSET_KEY: the environment variable MUR_TEST_UNSET_KEY is not set",
		"E-CFG-001: member worker: " + filepath.Join(root, "worker", "murmur.yaml") + ":3:",
		"2 error(s), 2 warning(s)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("check output lacks %q:\n%s", want, out.String())
		}
	}
	// mur run refuses to start on a staging error.
	out.Reset()
	errb.Reset()
	err = run(context.Background(), []string{"run", "--roster", filepath.Join(root, "roster.yaml"), "--data-dir", filepath.Join(root, "data")}, noEnv, &out, &errb)
	if code := exitCodeFor(err, &errb); code != 2 || !strings.Contains(errb.String(), "staging failed") {
		t.Errorf("mur run on a bad formation: exit %d, stderr %s", code, errb.String())
	}
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a running command and a test reading it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestRunSendAndShutDown(t *testing.T) {
	root := t.TempDir()
	// The hello example, on ports that are free now.
	src := "../../deploy/examples/hello"
	for _, rel := range []string{"lead/murmur.yaml", "lead/script.yaml", "worker/murmur.yaml", "worker/answer.sh"} {
		b, err := os.ReadFile(filepath.Join(src, rel))
		if err != nil {
			t.Fatal(err)
		}
		os.MkdirAll(filepath.Join(root, filepath.Dir(rel)), 0o755)
		os.WriteFile(filepath.Join(root, rel), b, 0o755)
	}
	b, _ := os.ReadFile(filepath.Join(src, "roster.yaml"))
	ports := freeAddrs(t, 2)
	rosterText := strings.NewReplacer("127.0.0.1:7101", ports[0], "127.0.0.1:7102", ports[1]).Replace(string(b))
	rosterPath := filepath.Join(root, "roster.yaml")
	os.WriteFile(rosterPath, []byte(rosterText), 0o644)
	env := envOf(map[string]string{"MUR_RECORDS_DIR": filepath.Join(root, "records"), "HOME": root})

	ctx, cancel := context.WithCancel(context.Background())
	var out, errb syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"run", "--roster", rosterPath}, env, &out, &errb) }()
	urls := map[string]string{}
	re := regexp.MustCompile(`(?m)^\s+(lead|worker)\s+(http://\S+)/a2a$`)
	for deadline := time.Now().Add(30 * time.Second); len(urls) < 2; time.Sleep(10 * time.Millisecond) {
		for _, m := range re.FindAllStringSubmatch(out.String(), -1) {
			urls[m[1]] = m[2]
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("mur run printed no doors:\n%s\n%s", out.String(), errb.String())
		}
	}
	if !strings.Contains(out.String(), "curl -s "+urls["lead"]+"/a2a") {
		t.Errorf("mur run printed no curl line for the entry member:\n%s", out.String())
	}
	tokenPath := filepath.Join(root, ".murmur", "operator.token")
	if fi, err := os.Stat(tokenPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("operator token %s: %v %v, want mode 0600", tokenPath, fi, err)
	}

	for _, tc := range []struct{ member, text, want string }{
		{"lead", "hello there", "Hello from lead"},
		{"worker", "2 + 40", "42"},
		{"lead", "status", "<untrusted-content source=tool:session-status>\n{\"time\":{\"elapsed_secs\":"},
		{"lead", "what do you see", "tools: session-status"},
	} {
		var sout, serr bytes.Buffer
		err := run(ctx, []string{"send", "--roster", rosterPath, "--member", tc.member, "--wait", tc.text}, env, &sout, &serr)
		if err != nil || !strings.Contains(sout.String(), tc.want) {
			t.Errorf("mur send to %s: %v, stdout %q, stderr %q; want %q", tc.member, err, sout.String(), serr.String(), tc.want)
		}
	}
	var sout, serr bytes.Buffer
	err := run(ctx, []string{"send", "--door", urls["worker"], "--token", "wrong", "hi"}, env, &sout, &serr)
	if err == nil || !strings.Contains(err.Error(), "missing or invalid bearer token") {
		t.Errorf("mur send with a wrong token: %v", err)
	}
	sout.Reset()
	if err := run(ctx, []string{"tasks", "--roster", rosterPath, "--member", "worker"}, env, &sout, &serr); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sout.String(), "COMPLETED") || !strings.Contains(sout.String(), "1 of 1 task(s)") {
		t.Errorf("mur tasks:\n%s", sout.String())
	}

	cancel()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("mur run ended with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("mur run did not shut down")
	}
}

// freeAddr returns a loopback address whose port was free a moment ago.
// freeAddrs returns n distinct free loopback addresses: each listener is held until all are taken, so
// the system cannot hand one port out twice.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		out = append(out, ln.Addr().String())
	}
	return out
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
