package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/murmur-run/murmur/internal/telemetry/otlptest"
)

// mur run with OTEL_EXPORTER_OTLP_ENDPOINT exports the formation's spans over OTLP; those not yet sent
// when it is stopped are flushed at exit. One mur send to lead that asks worker is one trace, which the
// receiver reads back: lead's and worker's server spans, their invoke_agent spans, the call's client span.
func TestRunExportsOneTracePerRequest(t *testing.T) {
	rcv := otlptest.NewReceiver()
	defer rcv.Close()
	root := t.TempDir()
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
	rosterPath := filepath.Join(root, "roster.yaml")
	os.WriteFile(rosterPath, []byte(strings.NewReplacer("127.0.0.1:7101", ports[0], "127.0.0.1:7102", ports[1]).Replace(string(b))), 0o644)
	vars := map[string]string{"MUR_RECORDS_DIR": filepath.Join(root, "records"), "HOME": root}

	// A variable mur cannot serve is a usage error, before any member starts.
	vars["OTEL_EXPORTER_OTLP_ENDPOINT"], vars["OTEL_EXPORTER_OTLP_PROTOCOL"] = rcv.URL, "http/json"
	var out, errb syncBuffer
	err := run(context.Background(), []string{"run", "--roster", rosterPath}, envOf(vars), &out, &errb)
	var ue usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_PROTOCOL") {
		t.Fatalf("mur run with http/json: %v, want a usage error naming the variable", err)
	}
	delete(vars, "OTEL_EXPORTER_OTLP_PROTOCOL")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"run", "--roster", rosterPath, "--console", "off"}, envOf(vars), &out, &errb)
	}()
	re := regexp.MustCompile(`(?m)^\s+lead\s+http://\S+/a2a$`)
	for deadline := time.Now().Add(30 * time.Second); !re.MatchString(out.String()); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("mur run printed no doors:\n%s\n%s", out.String(), errb.String())
		}
	}
	if !strings.Contains(errb.String(), "tracing on") {
		t.Errorf("mur run did not log that tracing is on:\n%s", errb.String())
	}
	var sout, serr bytes.Buffer
	if err := run(ctx, []string{"send", "--roster", rosterPath, "--wait", "ask worker: 2 + 3"}, envOf(vars), &sout, &serr); err != nil ||
		!strings.Contains(sout.String(), "worker says: 5") {
		t.Fatalf("mur send: %v %q %q", err, sout.String(), serr.String())
	}
	cancel()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("mur run ended with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("mur run did not shut down")
	}

	spans := rcv.Spans() // mur run has returned: what it flushed at exit is here
	var trace string
	for _, s := range spans {
		if s.Name == "SendMessage" && s.Attrs["murmur.member"] == "lead" && s.ParentID == "" {
			trace = s.TraceID
		}
	}
	if trace == "" {
		t.Fatalf("no span of lead's SendMessage arrived; %d spans did", len(spans))
	}
	want := map[string]bool{"SendMessage/lead": false, "invoke_agent lead/lead": false, "execute_tool call-member/lead": false,
		"SendMessage/worker": false, "invoke_agent worker/worker": false}
	for _, s := range spans {
		if s.TraceID != trace {
			continue
		}
		if s.Service != "mur" {
			t.Errorf("span %q of service %q, want mur", s.Name, s.Service)
		}
		want[s.Name+"/"+s.Attrs["murmur.member"].(string)] = true
	}
	for k, seen := range want {
		if !seen {
			t.Errorf("no span %s in the request's trace", k)
		}
	}
}
