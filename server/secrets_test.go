package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/peercred"
	"github.com/murmur-run/murmur/member/sandbox"
	"github.com/murmur-run/murmur/roster"
)

// envHarness is a capsule under transport: process running the fake harness (murmur-jsonl) with env as
// its harness.env and the shell binary env.
func envHarness(bin, name string, env []string) string {
	return fmt.Sprintf("name: %s\ntransport: process\nharness:\n  command: [%s, -dialect, murmur-jsonl]\n  dialect: murmur-jsonl\n  env: ['%s']\ncapabilities: {shell: {allow: [env]}, network: {allow: [localhost]}}\n",
		name, bin, strings.Join(env, "', '"))
}

func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// No program a member starts finds a secret of the runtime's in its environment, however harness.env
// names it: neither a harness under transport: process (a member's, or a delegated sub-capsule's) nor a
// shell binary. harness.env hands the harness the operator token, the formation token, the control token
// (written out, or by the name of a variable of mur's that holds it) and a member's peer credential; each
// is left out, the log and the harness_run record name the entry and why, and no answer, record or log
// line holds any of them. The entry that is no secret reaches the harness.
func TestProgramsGetNoSecret(t *testing.T) {
	bin := fakeHarness(t)
	operator, formation, control := "mur_"+randomHex(t), "mur_"+randomHex(t), "ctl-"+randomHex(t)
	cred := peercred.NewKey(formation, "f").Credential("lead", peercred.Trusted)
	t.Setenv("MURTEST_OPERATOR_COPY", operator)
	t.Setenv("MURTEST_CONTROL_COPY", control)
	harnessEnv := []string{"OP=" + operator, "MURTEST_OPERATOR_COPY", "CTL=" + control, "MURTEST_CONTROL_COPY",
		"PEER=Bearer " + cred, "FT=" + formation, "MODE=fast"}
	wantDropped := []sandbox.Dropped{
		{Name: "OP", Reason: "its value is the operator token"},
		{Name: "MURTEST_OPERATOR_COPY", Reason: "its value is the operator token"},
		{Name: "CTL", Reason: "its value is control token MUR_CONTROL_TOKEN"},
		{Name: "MURTEST_CONTROL_COPY", Reason: "its value is control token MUR_CONTROL_TOKEN"},
		{Name: "PEER", Reason: "its value holds a member's peer credential (murp1.…)"},
		{Name: "FT", Reason: "its value is the formation token"},
	}
	secrets := map[string]string{"the operator token": operator, "the formation token": formation,
		"the control token": control, "a peer credential": cred}

	root := t.TempDir()
	for name, body := range map[string]string{
		"roster.yaml":       "formation: f\nmembers:\n  - {name: lead, capsule: ./lead, listen: '127.0.0.1:0'}\n  - {name: chief, capsule: ./chief, listen: '127.0.0.1:0'}\n",
		"lead/murmur.yaml":  envHarness(bin, "lead", harnessEnv),
		"chief/murmur.yaml": strings.Replace(agentOf("chief"), "capabilities: {network: {allow: [localhost]}}\n", "capabilities: {network: {allow: [localhost]}, shell: {allow: [env]}, spawn: {allow: [./sub]}}\n", 1),
		// chief runs env in the http loop and delegates "env" to sub, a harness with the same harness.env.
		"chief/script.yaml":     "rules:\n  - match: ''\n    turns:\n      - call: [{tool: env, input: {args: []}}, {tool: delegate-task, input: {capsule: sub, task: env}}]\n      - say: waiting\n      - say: \"{{(index .results 0).text}}\\n---\\n{{.message}}\"\n",
		"chief/sub/murmur.yaml": envHarness(bin, "sub", harnessEnv),
	} {
		os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755)
		os.WriteFile(filepath.Join(root, name), []byte(body), 0o755)
	}
	r, err := roster.Load(filepath.Join(root, "roster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	f, err := StartFormation(FormationConfig{Roster: r, DataDir: filepath.Join(root, "data"),
		RecordsRoot: filepath.Join(root, "records"), Tokens: Tokens{Operator: operator, Formation: formation},
		ControlToken: control, Version: "test", Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	fx := &formationFixture{root: root, f: f, logs: logs, c: map[string]*a2a.Client{}}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		f.Shutdown(ctx)
	})
	for _, m := range f.Members {
		fx.c[m.Name] = a2a.NewClient(m.URL+"/a2a", operator, nil)
	}

	// lead's harness calls the shell binary env, then answers with its own environment.
	lead := fx.ask(t, "lead", "call env {\"args\":[]}\nenv")
	chief := fx.ask(t, "chief", "go")
	for _, task := range []*a2a.Task{lead, chief} {
		if task.Status.State != a2a.TaskStateCompleted {
			t.Fatalf("task %s: %s", task.Status.State, task.Status.Message.Text())
		}
	}
	shellOut := ofKind(harnessLog(t, fx, "lead"), "result")
	if len(shellOut) != 1 {
		t.Fatalf("lead's harness got %d tool results, want env's", len(shellOut))
	}
	// What each program saw, and proof that it ran and printed its environment.
	seen := map[string]string{"lead's harness": answerOf(lead), "lead's env tool": shellOut[0]["text"].(string), "chief's env tool and sub's harness": answerOf(chief)}
	for who, want := range map[string][]string{
		"lead's harness":                     {"MODE=fast", "MUR_MEMBER=lead"},
		"lead's env tool":                    {"PATH=", "HOME="},
		"chief's env tool and sub's harness": {"PATH=", "MODE=fast", "MUR_MEMBER=chief"},
	} {
		for _, w := range want {
			if !strings.Contains(seen[who], w) {
				t.Errorf("%s: no %s in what it printed:\n%s", who, w, seen[who])
			}
		}
	}

	// Every record of every session (lead's, chief's and the sub-session's) and every log line.
	var everything strings.Builder
	var runs []map[string]any
	filepath.Walk(filepath.Join(root, "records"), func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return nil
		}
		b, _ := os.ReadFile(p)
		everything.Write(b)
		if filepath.Base(p) == "trace.jsonl" {
			runs = append(runs, recordsOf(traceAt(t, filepath.Dir(p)), "harness_run")...)
		}
		return nil
	})
	everything.WriteString(logs.String())
	for who, s := range seen {
		everything.WriteString(who + ":\n" + s + "\n")
	}
	for what, s := range secrets {
		if strings.Contains(everything.String(), s) {
			t.Errorf("%s reached a program's environment, an answer, a record or a log line", what)
		}
	}

	// Each harness run says which entries were left out and why: lead's and the sub-session's.
	if len(runs) != 2 {
		t.Fatalf("%d harness_run records, want lead's and sub's", len(runs))
	}
	for _, run := range runs {
		b, _ := json.Marshal(run["env_dropped"])
		var got []sandbox.Dropped
		json.Unmarshal(b, &got)
		if diff := cmp.Diff(wantDropped, got); diff != "" {
			t.Errorf("harness_run env_dropped (-want +got):\n%s", diff)
		}
	}
	for _, d := range wantDropped {
		if line := "entry=" + d.Name + " "; !strings.Contains(logs.String(), line) {
			t.Errorf("no log line names the harness.env entry %s", d.Name)
		}
	}
}
