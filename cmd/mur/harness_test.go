package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/murmur-run/murmur/internal/fakeharness/build"
	"github.com/murmur-run/murmur/member/sandbox"
)

// The harness example (deploy/examples/harness), as docs/process-transport.md runs it: the fake harness built
// from the repository, mur run with the real confinement (this binary is the helper), mur send. The
// harness calls a shell binary and call-member over its tool server, is resumed with worker's answer,
// and cannot read the formation's operator token.
func TestHarnessExample(t *testing.T) {
	root := t.TempDir()
	src := "../../deploy/examples/harness"
	for _, rel := range []string{"coder/murmur.yaml", "worker/murmur.yaml", "worker/answer.sh"} {
		b, err := os.ReadFile(filepath.Join(src, rel))
		if err != nil {
			t.Fatal(err)
		}
		os.MkdirAll(filepath.Join(root, filepath.Dir(rel)), 0o755)
		os.WriteFile(filepath.Join(root, rel), b, 0o755)
	}
	bin, err := build.FakeHarness(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	copyFile(t, bin, filepath.Join(root, "coder", "fakeharness"))
	b, _ := os.ReadFile(filepath.Join(src, "roster.yaml"))
	ports := freeAddrs(t, 2)
	rosterText := strings.NewReplacer("127.0.0.1:7111", ports[0], "127.0.0.1:7112", ports[1]).Replace(string(b))
	rosterPath := filepath.Join(root, "roster.yaml")
	os.WriteFile(rosterPath, []byte(rosterText), 0o644)
	env := envOf(map[string]string{"MUR_RECORDS_DIR": filepath.Join(root, "records"), "HOME": root})

	var checkOut, checkErr bytes.Buffer
	if err := run(context.Background(), []string{"check", "--roster", rosterPath}, env, &checkOut, &checkErr); err != nil {
		t.Fatalf("mur check: %v\n%s%s", err, checkOut.String(), checkErr.String())
	}

	ctx, cancel := context.WithCancel(context.Background())
	var out, errb syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"run", "--roster", rosterPath}, env, &out, &errb) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("mur run ended with %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("mur run did not shut down")
		}
	}()
	for deadline := time.Now().Add(30 * time.Second); !regexp.MustCompile(`(?m)^\s+worker\s+http://`).MatchString(out.String()); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("mur run printed no doors:\n%s\n%s", out.String(), errb.String())
		}
	}
	token := filepath.Join(root, ".murmur", "operator.token")
	prompt := "call expr {\"args\":[\"6\",\"*\",\"7\"]}\ncall call-member {\"member\":\"worker\",\"task\":\"2 + 40\"}\nread " + token + "\nsay waiting"
	var sout, serr bytes.Buffer
	if err := run(ctx, []string{"send", "--roster", rosterPath, "--member", "coder", "--wait", prompt}, env, &sout, &serr); err != nil {
		t.Fatalf("mur send: %v\n%s\n%s\nmur run's log:\n%s", err, sout.String(), serr.String(), errb.String())
	}
	want := regexp.MustCompile(`resumed \S+: \[call-member\] call mcl_[0-9a-z]{26} to worker ended completed:\n<untrusted-content source=member:worker>\n42\n</untrusted-content>`)
	if !want.MatchString(sout.String()) {
		t.Errorf("coder's answer:\n%s", sout.String())
	}
	logBytes, err := os.ReadFile(filepath.Join(root, ".murmur", "members", "coder", "work", "fake-harness.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var results, reads []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(logBytes)), "\n") {
		var m map[string]any
		json.Unmarshal([]byte(line), &m)
		switch m["kind"] {
		case "result":
			results = append(results, m)
		case "read":
			reads = append(reads, m)
		}
	}
	if len(results) != 2 || results[0]["text"] != "<untrusted-content source=tool:expr>\nexit_code: 0\nstatus: ok\noutput_bytes: 3\noutput_shown: all\n\n42\n</untrusted-content>" {
		t.Errorf("results: %v", results)
	}
	if len(reads) != 1 {
		t.Fatalf("reads: %v", reads)
	}
	t.Logf("Landlock %v; the harness reading the operator token: %v", sandbox.LandlockAvailable(), reads[0])
	if sandbox.LandlockAvailable() && reads[0]["ok"] != false {
		t.Errorf("the confined harness read the operator token: %v", reads[0])
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
