package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	taskusage "github.com/murmur-run/murmur/member/usage"
	"github.com/murmur-run/murmur/roster"
	"github.com/murmur-run/murmur/server"
)

// mur get shows what a task used, its own tokens apart from those of the task it caused and their sum,
// and the trace it ran in with its page in the trace UI MUR_TRACE_URL names.
func TestGetShowsUsageAndTrace(t *testing.T) {
	root := t.TempDir()
	for rel, body := range map[string]string{
		"roster.yaml":        "formation: f\nmembers:\n  - {name: lead, capsule: ./lead, listen: '127.0.0.1:0'}\n  - {name: helper, capsule: ./helper, listen: '127.0.0.1:0'}\nreach:\n  - {from: lead, to: [helper]}\n",
		"lead/murmur.yaml":   "name: lead\ninference:\n  driver: local\n  choices:\n    local: {driver: script, script: script.yaml}\ncapabilities: {network: {allow: [localhost]}}\n",
		"lead/script.yaml":   "rules:\n  - match: ''\n    turns:\n      - call: [{tool: call-member, input: {member: helper, task: '{{.task}}'}}]\n      - say: waiting\n      - say: 'helper says: {{(index .answers 0).output}}'\n",
		"helper/murmur.yaml": "name: helper\ninference:\n  driver: local\n  choices:\n    local: {driver: script}\n",
	} {
		os.MkdirAll(filepath.Dir(filepath.Join(root, rel)), 0o755)
		if err := os.WriteFile(filepath.Join(root, rel), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, err := roster.Load(filepath.Join(root, "roster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider()
	f, err := server.StartFormation(server.FormationConfig{Roster: r, DataDir: filepath.Join(root, "data"), RecordsRoot: filepath.Join(root, "records"),
		Tokens: server.Tokens{Operator: "op", Formation: "fm"}, Version: "test", TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		f.Shutdown(ctx)
		tp.Shutdown(ctx)
	})
	lead := f.Members[0].URL
	res, err := a2a.NewClient(lead+"/a2a", "op", nil).SendMessage(context.Background(), &a2a.SendMessageRequest{Message: &a2a.Message{
		MessageID: a2a.MessageID(ids.New(ids.PrefixMessage)), Role: a2a.RoleUser, Parts: []a2a.Part{a2a.TextPart("hi")}}})
	if err != nil || res.Task == nil || res.Task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("lead's task: %v %+v", err, res)
	}
	meta := ids.Murmur(res.Task.Metadata)
	u, ok := taskusage.Read(meta)
	trace, _ := ids.Get(meta, ids.MetaTraceID).(string)
	if !ok || u.Tasks != 1 || u.Self.Calls != 3 || u.Caused.Calls != 1 || trace == "" {
		t.Fatalf("lead's task reports usage %+v (%v) and trace %q", u, ok, trace)
	}

	var stdout, stderr bytes.Buffer
	env := envOf(map[string]string{"MUR_TRACE_URL": "http://localhost:16686/trace/{trace_id}"})
	if err := cmdGet(context.Background(), []string{"--door", lead, "--token", "op", string(res.Task.ID)}, env, &stdout, &stderr); err != nil {
		t.Fatalf("mur get: %v\n%s", err, stderr.String())
	}
	for _, want := range []string{
		fmt.Sprintf(`(?m)^tokens\s+%d in, %d out; 3 inference call\(s\) \(own\)$`, u.Self.Input, u.Self.Output),
		fmt.Sprintf(`(?m)^\s+%d in, %d out; 1 inference call\(s\) \(caused: 1 task\(s\) and sub-session\(s\)\)$`, u.Caused.Input, u.Caused.Output),
		fmt.Sprintf(`(?m)^\s+%d in, %d out; 4 inference call\(s\) \(in all\)$`, u.Total.Input, u.Total.Output),
		`(?m)^trace\s+` + trace + `  http://localhost:16686/trace/` + trace + `$`,
	} {
		if !regexp.MustCompile(want).MatchString(stdout.String()) {
			t.Errorf("mur get's output does not match %s:\n%s", want, stdout.String())
		}
	}
}
