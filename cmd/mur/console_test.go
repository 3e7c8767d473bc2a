package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// helloOnPort0 copies the hello example into a temporary directory with its doors on port 0.
func helloOnPort0(t *testing.T) (root, rosterPath string) {
	t.Helper()
	root = t.TempDir()
	src := "../../deploy/examples/hello"
	for _, rel := range []string{"roster.yaml", "lead/murmur.yaml", "lead/script.yaml", "worker/murmur.yaml", "worker/answer.sh"} {
		b, err := os.ReadFile(filepath.Join(src, rel))
		if err != nil {
			t.Fatal(err)
		}
		if rel == "roster.yaml" {
			b = []byte(strings.NewReplacer("127.0.0.1:7101", "127.0.0.1:0", "127.0.0.1:7102", "127.0.0.1:0").Replace(string(b)))
		}
		os.MkdirAll(filepath.Join(root, filepath.Dir(rel)), 0o755)
		os.WriteFile(filepath.Join(root, rel), b, 0o755)
	}
	return root, filepath.Join(root, "roster.yaml")
}

// startMur runs mur with args until the test ends, and returns its stdout as it grows.
func startMur(t *testing.T, args []string, env func(string) string) *syncBuffer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, env, &out, &errb) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("mur %s ended with %v\n%s", args[0], err, errb.String())
			}
		case <-time.After(30 * time.Second):
			t.Errorf("mur %s did not shut down", args[0])
		}
	})
	return &out
}

func waitOutput(t *testing.T, out *syncBuffer, re *regexp.Regexp, n int) [][]string {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if m := re.FindAllStringSubmatch(out.String(), -1); len(m) >= n {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("mur printed no %s:\n%s", re, out.String())
		}
	}
}

// openConsole logs in with a printed login URL and returns the formation page once it shows want.
func openConsole(t *testing.T, login, want string) string {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: 20 * time.Second}
	res, err := hc.Get(login)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("login URL %s: %d", login, res.StatusCode)
	}
	base := login[:strings.Index(login, "/login")]
	var body string
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(body, want); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the console's formation page never showed %q:\n%s", want, body)
		}
		res, err := hc.Get(base + "/")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		body = string(b)
	}
	return body
}

var consoleLine = regexp.MustCompile(`(?m)^\s+console\s+(http://127\.0\.0\.1:\d+/login\?code=\S+)$`)

func TestRunServesTheConsoleAndMurConsoleServesItFromElsewhere(t *testing.T) {
	root, rosterPath := helloOnPort0(t)
	env := envOf(map[string]string{"MUR_RECORDS_DIR": filepath.Join(root, "records"), "HOME": root})

	// --console off: doors, no console.
	off := startMur(t, []string{"run", "--roster", rosterPath, "--console", "off", "--data-dir", filepath.Join(root, "off")}, env)
	waitOutput(t, off, regexp.MustCompile(`(?m)^\s+worker\s+http://\S+/a2a$`), 1)
	if consoleLine.MatchString(off.String()) {
		t.Errorf("mur run --console off printed a console:\n%s", off.String())
	}

	// The default: a console on loopback, printed beside the doors.
	out := startMur(t, []string{"run", "--roster", rosterPath}, env)
	doors := waitOutput(t, out, regexp.MustCompile(`(?m)^\s+(lead|worker)\s+(http://\S+)/a2a$`), 2)
	login := waitOutput(t, out, consoleLine, 1)[0][1]
	page := openConsole(t, login, `ms-idle">idle`)
	for _, d := range doors {
		if !strings.Contains(page, d[2]+"/a2a") {
			t.Errorf("the console does not show %s's door %s", d[1], d[2])
		}
	}

	// mur console: the same formation seen from another process, by its doors' URLs and the token.
	urls := doors[0][1] + "=" + doors[0][2] + "," + doors[1][1] + "=" + doors[1][2]
	token, err := os.ReadFile(filepath.Join(root, ".murmur", "operator.token"))
	if err != nil {
		t.Fatal(err)
	}
	cout := startMur(t, []string{"console", "--roster", rosterPath, "--door-urls", urls, "--token", strings.TrimSpace(string(token)), "--records", "off"}, noEnv)
	login2 := waitOutput(t, cout, regexp.MustCompile(`(?m)^\s+(http://127\.0\.0\.1:\d+/login\?code=\S+)$`), 1)[0][1]
	page = openConsole(t, login2, `ms-idle">idle`)
	if !strings.Contains(page, "The records are not on this machine") {
		t.Errorf("mur console --records off does not say the records are elsewhere")
	}
}

func TestConsoleFlagsAreChecked(t *testing.T) {
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"run", "--roster", "x.yaml", "--console", "nowhere"}, `--console "nowhere": give an address such as 127.0.0.1:0`},
		{[]string{"console"}, "--roster is required"},
		{[]string{"console", "--roster", "/nonexistent/roster.yaml"}, "/nonexistent/roster.yaml"},
	} {
		var out, errb syncBuffer
		err := run(context.Background(), tc.args, noEnv, &out, &errb)
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("mur %v: %v, want a usage error saying %q", tc.args, err, tc.says)
		}
	}
}
