package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/stage"
	"github.com/murmur-run/murmur/roster"
)

// leadWith is an agent capsule named lead on the script driver whose capabilities.spawn.allow is spawn,
// with extra murmur.yaml lines.
func leadWith(spawn, extra string) string {
	return strings.Replace(agentOf("lead"), "capabilities: {network: {allow: [localhost]}}\n",
		"capabilities: {network: {allow: [localhost]}, spawn: {allow: ["+spawn+"]}}\n", 1) + extra
}

// echoSub is a script sub-capsule answering "<name> did: <task>".
func echoSub(name string) string {
	return "name: " + name + "\nscript: {command: [sh, -c, 'read -r l; echo \"" + name + " did: $l\"']}\n"
}

// gatedSub is a script sub-capsule that finishes only once the file "go" exists in its directory.
const gatedSub = "name: slow\nscript:\n  command: [sh, -c, 'read -r l; while [ ! -e \"$MUR_CAPSULE_DIR/go\" ]; do sleep 0.01; done; echo \"slow did: $l\"']\n"

const soloRoster = "formation: f\nmembers:\n  - {name: lead, capsule: ./lead, listen: '127.0.0.1:0'}\n"

func (fx *formationFixture) metrics(t *testing.T, member string) string {
	t.Helper()
	for _, m := range fx.f.Members {
		if m.Name == member {
			resp, err := http.Get(m.URL + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return string(b)
		}
	}
	t.Fatalf("no member %s", member)
	return ""
}

// startSlow starts lead, which delegates every task to a sub-capsule that never finishes on its own,
// with extra lines in lead's murmur.yaml.
func startSlow(t *testing.T, extra string) *formationFixture {
	t.Helper()
	fx := startFormation(t, map[string]string{
		"roster.yaml":           soloRoster,
		"lead/murmur.yaml":      leadWith("./slow", extra),
		"lead/script.yaml":      "rules:\n  - match: ''\n    turns:\n      - call: [{tool: delegate-task, input: {capsule: slow, task: '{{.task}}'}}]\n      - say: waiting\n      - say: \"{{.message}}\"\n",
		"lead/slow/murmur.yaml": gatedSub,
	}, Tokens{Operator: "op", Formation: "fm"})
	t.Cleanup(func() { os.WriteFile(filepath.Join(fx.root, "lead", "slow", "go"), nil, 0o644) })
	return fx
}

var dlgID = regexp.MustCompile(`dlg_[0-9a-z]{26}`)

// An agent delegates to two sub-capsules in one turn and answers with both outcomes, from one
// continuation; each sub-session has its own ses_ id, a workdir under lead's, records naming its parent
// and delegation, and the calling task's trust class.
func TestDelegateToTwoSubCapsules(t *testing.T) {
	fx := startFormation(t, map[string]string{
		"roster.yaml":                soloRoster,
		"lead/murmur.yaml":           leadWith("./alpha, ./subs/beta", ""),
		"lead/script.yaml":           "rules:\n  - match: ''\n    turns:\n      - call: [{tool: delegate-task, input: {capsule: alpha, task: 'A {{.task}}'}}, {tool: delegate-task, input: {capsule: beta, task: 'B {{.task}}'}}]\n      - say: waiting\n      - say: \"{{(index .results 0).text}}\\n---\\n{{.message}}\\n---\\n{{range .answers}}{{.member}}={{.status}};{{end}}\"\n",
		"lead/alpha/murmur.yaml":     echoSub("alpha"),
		"lead/subs/beta/murmur.yaml": echoSub("beta"),
	}, Tokens{Operator: "op", Formation: "fm"})
	task := fx.ask(t, "lead", "job")
	if task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("lead's task %s: %+v", task.Status.State, task.Status.Message)
	}
	got := answerOf(task)
	ids := dlgID.FindAllString(got, -1)
	if len(ids) < 3 {
		t.Fatalf("no delegation ids in %q", got)
	}
	a, b := ids[0], ids[len(ids)-1]
	want := "<untrusted-content source=tool:delegate-task>\n" +
		`{"delegation_id":"` + a + `","capsule":"alpha","status":"started"}` + "\n" +
		"</untrusted-content>\n" +
		"[delegate-task] alpha is now working on delegation " + a + ". Its outcome is not in this result: the runtime adds it to this conversation after you end your turn. End your turn now unless you have other work to hand out.\n" +
		"---\n" +
		"[delegate-task] delegation " + a + " to alpha ended completed:\n" +
		"<untrusted-content source=capsule:alpha>\nalpha did: A job\n</untrusted-content>\n\n" +
		"[delegate-task] delegation " + b + " to beta ended completed:\n" +
		"<untrusted-content source=capsule:beta>\nbeta did: B job\n</untrusted-content>\n\n" +
		"[delegate-task] Every delegation this task made has ended, and the outcomes are above. Answer the task with them now; delegate again only to give a sub-capsule new work.\n" +
		"---\n" +
		"alpha=completed;beta=completed;"
	if got != want {
		t.Errorf("what lead's model received:\n%s\nwant:\n%s", got, want)
	}
	recs := fx.records(t, "lead")
	if n := count(recs, "task_continued"); n != 1 {
		t.Errorf("%d task_continued records, want 1 continuation for both", n)
	}
	starts := recordsOf(recs, "delegation_start")
	ends := recordsOf(recs, "delegation")
	if len(starts) != 2 || len(ends) != 2 {
		t.Fatalf("%d delegation_start and %d delegation records, want 2 each", len(starts), len(ends))
	}
	parent := fx.f.Members[0].Session.ID()
	// The grant is the tool's existence: declared in session_start, its manifest staged with the enum.
	if ss := recordsOf(recs, "session_start"); len(ss) != 1 || !strings.Contains(fmt.Sprint(ss[0]["tools_declared"]), "delegate-task") {
		t.Errorf("session_start's tools_declared lacks delegate-task: %v", ss)
	}
	manifest, err := os.ReadFile(filepath.Join(fx.root, "data", "members", "lead", "run", parent, "tools", "delegate-task", "murmur.yaml"))
	if err != nil || !strings.Contains(string(manifest), "enum:\n") || !strings.Contains(string(manifest), "- alpha\n") || !strings.Contains(string(manifest), "- beta\n") {
		t.Errorf("delegate-task's manifest (%v):\n%s", err, manifest)
	}
	workdir := filepath.Join(fx.root, "data", "members", "lead", "work")
	for i, st := range starts {
		if ends[i]["status"] != "completed" || ends[i]["delivered"] != true {
			t.Errorf("delegation record %v", ends[i])
		}
		sub := st["sub_session"].(string)
		if !strings.HasPrefix(sub, "ses_") || sub == parent {
			t.Fatalf("sub-session id %q", sub)
		}
		subRecs := traceAt(t, filepath.Join(fx.root, "records", sub))
		ss := recordsOf(subRecs, "session_start")
		if len(ss) != 1 || ss[0]["parent"] != parent || ss[0]["delegation"] != st["delegation_id"] || ss[0]["depth"] != float64(1) {
			t.Errorf("sub-session's session_start %v, want parent %s and delegation %s", ss, parent, st["delegation_id"])
		}
		if ts := recordsOf(subRecs, "task_start"); len(ts) != 1 || ts[0]["trust"] != "trusted" || ts[0]["origin"] != "delegation" {
			t.Errorf("sub-session's task_start %v: want the calling task's trust class", ts)
		}
		if fi, err := os.Stat(filepath.Join(workdir, "delegations", st["delegation_id"].(string))); err != nil || !fi.IsDir() {
			t.Errorf("no workdir delegations/%s under lead's: %v", st["delegation_id"], err)
		}
	}
	m := fx.metrics(t, "lead")
	for _, want := range []string{`mur_delegations_total{capsule="alpha",member="lead",status="completed"} 1`,
		`mur_delegations_total{capsule="beta",member="lead",status="completed"} 1`} {
		if !strings.Contains(m, want) {
			t.Errorf("lead's /metrics lacks %s", want)
		}
	}
}

// A sub-capsule that runs past lifecycle.delegation_deadline_secs is cancelled: its outcome is
// timed_out, and its own task ends TASK_STATE_CANCELED.
func TestDelegationPastItsDeadlineIsCancelled(t *testing.T) {
	fx := startSlow(t, "lifecycle: {delegation_deadline_secs: 1}\n")
	task := fx.ask(t, "lead", "forever")
	if task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("lead's task %s: %+v", task.Status.State, task.Status.Message)
	}
	got := answerOf(task)
	id := dlgID.FindString(got)
	want := "[delegate-task] delegation " + id + " to slow ended timed_out:\n" +
		"<untrusted-content source=capsule:slow>\nslow did not finish within 1s (lifecycle.delegation_deadline_secs); its task was cancelled.\n</untrusted-content>\n\n" +
		"[delegate-task] No outcome came from: slow (delegation " + id + ", timed_out). What you delegated to them has not been done by them: do not present an answer of your own as theirs.\n\n" +
		"[delegate-task] Every delegation this task made has ended. Answer the task with the outcomes you have and say plainly which part has no answer, or delegate again if another attempt could succeed."
	if got != want {
		t.Errorf("continuation:\n%s\nwant:\n%s", got, want)
	}
	st := recordsOf(fx.records(t, "lead"), "delegation_start")
	if len(st) != 1 {
		t.Fatalf("%d delegation_start records", len(st))
	}
	ends := recordsOf(traceAt(t, filepath.Join(fx.root, "records", st[0]["sub_session"].(string))), "task_end")
	if len(ends) != 1 || ends[0]["state"] != "TASK_STATE_CANCELED" {
		t.Errorf("the sub-session's task_end %v, want TASK_STATE_CANCELED", ends)
	}
	if !strings.Contains(fx.metrics(t, "lead"), `mur_delegations_total{capsule="slow",member="lead",status="timed_out"} 1`) {
		t.Error("mur_delegations_total has no timed_out delegation")
	}
}

// A delegation and a member call outstanding together arrive in one continuation, the member's answer
// first.
func TestDelegationAndMemberCallInOneContinuation(t *testing.T) {
	fx := startFormation(t, map[string]string{
		"roster.yaml":            "formation: f\nmembers:\n  - {name: lead, capsule: ./lead, listen: '127.0.0.1:0'}\n  - {name: worker, capsule: ./worker, listen: '127.0.0.1:0'}\nreach:\n  - {from: lead, to: [worker]}\n",
		"lead/murmur.yaml":       strings.Replace(agentOf("lead"), "capabilities: {network: {allow: [localhost]}}\n", "capabilities:\n  network: {allow: [localhost]}\n  spawn: {allow: [./alpha]}\n", 1),
		"lead/script.yaml":       "rules:\n  - match: ''\n    turns:\n      - call: [{tool: delegate-task, input: {capsule: alpha, task: 'A {{.task}}'}}, {tool: call-member, input: {member: worker, task: 'W {{.task}}'}}]\n      - say: waiting\n      - say: \"{{.message}}\"\n",
		"lead/alpha/murmur.yaml": echoSub("alpha"),
		"worker/murmur.yaml":     "name: worker\nscript: {command: [sh, -c, 'read -r l; echo \"worker got: $l\"']}\n",
	}, Tokens{Operator: "op", Formation: "fm"})
	task := fx.ask(t, "lead", "both")
	if task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("lead's task %s: %+v", task.Status.State, task.Status.Message)
	}
	got := answerOf(task)
	call := regexp.MustCompile(`mcl_[0-9a-z]{26}`).FindString(got)
	id := dlgID.FindString(got)
	want := "[call-member] call " + call + " to worker ended completed:\n" +
		"<untrusted-content source=member:worker>\nworker got: W both\n</untrusted-content>\n\n" +
		"[delegate-task] delegation " + id + " to alpha ended completed:\n" +
		"<untrusted-content source=capsule:alpha>\nalpha did: A both\n</untrusted-content>\n\n" +
		"[call-member] Every call this task made has ended, and the answers are above. Answer the task with them now; call a member again only to give it new work."
	if got != want {
		t.Errorf("continuation:\n%s\nwant:\n%s", got, want)
	}
	if n := count(fx.records(t, "lead"), "task_continued"); n != 1 {
		t.Errorf("%d task_continued records, want one continuation", n)
	}
}

// Cancelling the parent task cancels the sub-session's task (TASK_STATE_CANCELED) and records the
// delegation abandoned, never delivered.
func TestCancellingTheParentCancelsTheSubSession(t *testing.T) {
	fx := startSlow(t, "")
	id := fx.askUntil(t, "lead", "slow job", "waiting on delegate-task: 1 delegation(s) outstanding")
	got, err := fx.c["lead"].CancelTask(context.Background(), &a2a.CancelTaskRequest{ID: id})
	if err != nil || got.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("cancel while waiting: %+v %v", got, err)
	}
	recs := fx.records(t, "lead")
	ends := recordsOf(recs, "delegation")
	if len(ends) != 1 || ends[0]["status"] != "abandoned" || ends[0]["delivered"] != false {
		t.Fatalf("delegation records %v, want one abandoned, not delivered", ends)
	}
	subEnds := recordsOf(traceAt(t, filepath.Join(fx.root, "records", ends[0]["sub_session"].(string))), "task_end")
	if len(subEnds) != 1 || subEnds[0]["state"] != "TASK_STATE_CANCELED" {
		t.Errorf("the sub-session's task_end %v, want TASK_STATE_CANCELED", subEnds)
	}
}

// A chain of delegations deeper than 3 is refused at staging with E-CAP-020; a chain of 3 is not.
func TestDelegationChainTooDeepIsRefusedAtStaging(t *testing.T) {
	root := t.TempDir()
	sub := func(name, next string) string {
		s := agentOf(name)
		if next != "" {
			s = strings.Replace(s, "capabilities: {network: {allow: [localhost]}}\n", "capabilities: {spawn: {allow: ["+next+"]}}\n", 1)
		}
		return s
	}
	files := map[string]string{
		"roster.yaml":      soloRoster,
		"lead/murmur.yaml": sub("lead", "../a"),
		"a/murmur.yaml":    sub("a", "../b"),
		"b/murmur.yaml":    sub("b", "../c"),
		"c/murmur.yaml":    sub("c", "../d"),
		"d/murmur.yaml":    sub("d", ""),
	}
	for _, dir := range []string{"lead", "a", "b", "c", "d"} {
		files[dir+"/script.yaml"] = "rules:\n  - match: ''\n    turns: [{say: ok}]\n"
	}
	for name, body := range files {
		os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755)
		os.WriteFile(filepath.Join(root, name), []byte(body), 0o644)
	}
	r, err := roster.Load(filepath.Join(root, "roster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	findings := func() []string {
		var out []string
		for _, f := range stage.Formation(r, nil, func(string) string { return "" }) {
			if strings.HasPrefix(f.Code, "E-CAP-02") {
				out = append(out, f.String())
			}
		}
		return out
	}
	got := findings()
	if len(got) != 1 || !strings.HasPrefix(got[0], "E-CAP-020: member lead: ") ||
		!strings.Contains(got[0], "delegations can chain a -> b -> c -> d, 4 deep; a chain may be at most 3 deep") {
		t.Errorf("findings %q, want one E-CAP-020 naming the chain", got)
	}
	os.WriteFile(filepath.Join(root, "c", "murmur.yaml"), []byte(sub("c", "")), 0o644)
	if got := findings(); len(got) != 0 {
		t.Errorf("a chain of 3 is allowed, got %q", got)
	}
	os.WriteFile(filepath.Join(root, "c", "murmur.yaml"), []byte(sub("c", "../missing")), 0o644)
	if got := findings(); len(got) != 1 || !strings.HasPrefix(got[0], "E-CAP-021: member lead: ") {
		t.Errorf("findings %q, want E-CAP-021 for the missing sub-capsule", got)
	}
}

// 100 delegations, sequential tasks of one member, leave no goroutine behind once the formation is
// shut down.
func TestDelegationsLeakNoGoroutines(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	fx := startFormation(t, map[string]string{
		"roster.yaml":            soloRoster,
		"lead/murmur.yaml":       leadWith("./alpha", ""),
		"lead/script.yaml":       "rules:\n  - match: ''\n    turns:\n      - call: [{tool: delegate-task, input: {capsule: alpha, task: '{{.task}}'}}]\n      - say: waiting\n      - say: \"{{(index .answers 0).output}}\"\n",
		"lead/alpha/murmur.yaml": echoSub("alpha"),
	}, Tokens{Operator: "op", Formation: "fm"})
	for i := range 100 {
		task := fx.ask(t, "lead", "n"+string(rune('a'+i%26)))
		if task.Status.State != a2a.TaskStateCompleted || !strings.HasPrefix(answerOf(task), "alpha did: n") {
			t.Fatalf("task %d: %s %q", i, task.Status.State, answerOf(task))
		}
	}
	if n := count(recordsOf(fx.records(t, "lead"), "delegation"), "delegation"); n != 100 {
		t.Errorf("%d delegation records, want 100", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := fx.f.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

// A sub-session's session-status reports its own numbers: the parent's deadline when it is earlier than
// its own, its own turns; and the parent's turns.used does not count the sub-session's.
func TestSubSessionStatusIsItsOwn(t *testing.T) {
	sub := "name: helper\ninference:\n  driver: local\n  choices:\n    local: {driver: script, script: script.yaml}\ndeadline: 5h\n"
	fx := startFormation(t, map[string]string{
		"roster.yaml":             soloRoster,
		"lead/murmur.yaml":        leadWith("./helper", "deadline: 2h\n"),
		"lead/script.yaml":        "rules:\n  - match: ''\n    turns:\n      - call: [{tool: delegate-task, input: {capsule: helper, task: '{{.task}}'}}]\n      - say: waiting\n      - call: [{tool: session-status, input: {}}]\n      - say: \"{{(index .results 0).output}}\\n---\\n{{(index .answers 0).output}}\"\n",
		"lead/helper/murmur.yaml": sub,
		"lead/helper/script.yaml": "rules:\n  - match: ''\n    turns:\n      - call: [{tool: session-status, input: {}}]\n      - say: '{{(index .results 0).output}}'\n",
	}, Tokens{Operator: "op", Formation: "fm"})
	task := fx.ask(t, "lead", "status")
	if task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("lead's task %s: %+v", task.Status.State, task.Status.Message)
	}
	own, body, _ := strings.Cut(answerOf(task), "\n---\n")
	var parent, child struct {
		Time struct {
			Deadline struct {
				At string `json:"at"`
			} `json:"deadline"`
		} `json:"time"`
		Turns struct {
			Used int `json:"used"`
		} `json:"turns"`
	}
	if err := json.Unmarshal([]byte(own), &parent); err != nil {
		t.Fatalf("lead's session-status %q: %v", own, err)
	}
	if err := json.Unmarshal([]byte(body), &child); err != nil {
		t.Fatalf("helper's session-status %q: %v", body, err)
	}
	if parent.Time.Deadline.At == "" || child.Time.Deadline.At != parent.Time.Deadline.At {
		t.Errorf("helper's deadline %q, want lead's earlier one %q", child.Time.Deadline.At, parent.Time.Deadline.At)
	}
	if parent.Turns.Used != 3 {
		t.Errorf("lead's turns.used %d, want 3: its own calls only, none of helper's", parent.Turns.Used)
	}
	if child.Turns.Used != 1 {
		t.Errorf("helper's turns.used %d, want 1: its own", child.Turns.Used)
	}
}

// A spawn.allow entry may name a runtime: capsule artifact in the project store; its bare name is what
// the model delegates to.
func TestDelegateToACapsuleArtifact(t *testing.T) {
	fx := startFormation(t, map[string]string{
		"roster.yaml":      soloRoster,
		"lead/murmur.yaml": leadWith("local/summ", ""),
		"lead/script.yaml": "rules:\n  - match: ''\n    turns:\n      - call: [{tool: delegate-task, input: {capsule: summ, task: '{{.task}}'}}]\n      - say: waiting\n      - say: \"{{(index .answers 0).status}}: {{(index .answers 0).output}}\"\n",
		".murmur/store/local/summ/1.0.0/murmur.yaml":         "name: local/summ\nversion: 1.0.0\nruntime: capsule\nimplementation: capsule\ncapsule: capsule\ndescription: echoes\n",
		".murmur/store/local/summ/1.0.0/capsule/murmur.yaml": echoSub("summ"),
	}, Tokens{Operator: "op", Formation: "fm"})
	task := fx.ask(t, "lead", "from the store")
	if got := answerOf(task); got != "completed: summ did: from the store" {
		t.Errorf("lead answered %q (%s)", got, task.Status.State)
	}
}

// The session's end cancels every sub-session still working: the delegation is abandoned and the
// sub-session's task ends TASK_STATE_CANCELED.
func TestSessionEndCancelsSubSessions(t *testing.T) {
	fx := startSlow(t, "")
	fx.askUntil(t, "lead", "slow job", "waiting on delegate-task: 1 delegation(s) outstanding")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := fx.f.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	ends := recordsOf(fx.records(t, "lead"), "delegation")
	if len(ends) != 1 || ends[0]["status"] != "abandoned" || ends[0]["delivered"] != false {
		t.Fatalf("delegation records %v, want one abandoned, not delivered", ends)
	}
	sub := traceAt(t, filepath.Join(fx.root, "records", ends[0]["sub_session"].(string)))
	if e := recordsOf(sub, "task_end"); len(e) != 1 || e[0]["state"] != "TASK_STATE_CANCELED" {
		t.Errorf("the sub-session's task_end %v, want TASK_STATE_CANCELED", e)
	}
	if len(recordsOf(sub, "session_end")) != 1 {
		t.Error("the sub-session wrote no session_end")
	}
}

// Each refused delegation names what is wrong and starts nothing.
func TestDelegationRefusals(t *testing.T) {
	cases := []struct{ input, want string }{
		{"{capsule: nope, task: x}", `'delegate-task' has no sub-capsule "nope": the capsules this one may hand tasks to are alpha.`},
		{"{capsule: alpha, task: '  '}", "'delegate-task' needs a task: the whole of what alpha is told."},
		{"{capsule: alpha}", `'delegate-task' needs {"capsule": "<name>", "task": "<text>"}, both required.`},
	}
	var b strings.Builder
	b.WriteString("rules:\n")
	for i, tc := range cases {
		fmt.Fprintf(&b, "  - match: '^case%d$'\n    turns:\n      - call: [{tool: delegate-task, input: %s}]\n      - say: '{{(index .results 0).status}}|{{(index .results 0).output}}'\n", i, tc.input)
	}
	fx := startFormation(t, map[string]string{
		"roster.yaml":            soloRoster,
		"lead/murmur.yaml":       leadWith("./alpha", ""),
		"lead/script.yaml":       b.String(),
		"lead/alpha/murmur.yaml": echoSub("alpha"),
	}, Tokens{Operator: "op", Formation: "fm"})
	for i, tc := range cases {
		if got := answerOf(fx.ask(t, "lead", fmt.Sprintf("case%d", i))); got != "refused|"+tc.want {
			t.Errorf("case %d: the model saw %q, want %q", i, got, "refused|"+tc.want)
		}
	}
	recs := fx.records(t, "lead")
	if n := len(recordsOf(recs, "delegation_start")) + len(recordsOf(recs, "delegation")); n != 0 {
		t.Errorf("a refused delegation wrote %d delegation records", n)
	}
}
