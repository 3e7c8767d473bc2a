package member

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestFSRules checks which paths become which Landlock rules, and the carve-out of a data directory
// inside a granted directory (roster `capsule: .` beside `.murmur/`).
func TestFSRules(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p := func(rel string) string { return filepath.Join(root, rel) }
	for _, f := range []string{
		"proj/murmur.yaml", "proj/answer.sh", "proj/lib/util.sh",
		"proj/.murmur/operator.token", "proj/.murmur/formation.token", "proj/.murmur/members/m/tasks.db",
		"proj/.murmur/members/m/work/in.txt",
		"proj/deep/a/b.txt", "proj/deep/keep.txt", "proj/deep/a/records/ses_x/trace.jsonl",
		"extra/data.csv", "home/.ssh/id_ed25519", "home/notes.txt",
	} {
		os.MkdirAll(filepath.Dir(p(f)), 0o755)
		os.WriteFile(p(f), []byte("x"), 0o644)
	}
	// A link beside the data directory that leads back into it is no way in.
	os.Symlink(".murmur", p("proj/data-link"))
	os.Symlink(p("extra"), p("extra-link"))

	spec := confineSpec{
		Read:  []string{p("proj"), p("extra-link"), p("home"), p("missing")},
		Write: []string{p("proj/.murmur/members/m/work")},
		Deny:  []string{p("proj/.murmur"), p("proj/deep/a/records"), p("home")},
	}
	rules, err := fsRules(spec, "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rules {
		if within(r.Path, root) {
			got = append(got, strings.TrimPrefix(r.Path, root+"/")+" "+r.Access.String())
		}
	}
	want := []string{
		// proj less .murmur and the records two levels down; the link is left out.
		"proj/answer.sh read",
		"proj/deep/a/b.txt read",
		"proj/deep/keep.txt read",
		"proj/lib read",
		"proj/murmur.yaml read",
		// the link resolved
		"extra read",
		// home is denied whole; the workdir inside the data directory is granted on purpose
		"proj/.murmur/members/m/work write",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rules under the test root (-want +got):\n%s", diff)
	}
	// The system directories and the device nodes, as they are on this host.
	var sys []string
	for _, r := range rules {
		if !within(r.Path, root) {
			sys = append(sys, r.Path+" "+r.Access.String())
		}
	}
	for _, w := range []string{"/usr read", "/etc read", "/dev/null device", "/dev/urandom read"} {
		if !slices.Contains(sys, w) {
			t.Errorf("no rule %q among %v", w, sys)
		}
	}
	for _, r := range sys {
		if r == "/ read" || strings.HasPrefix(r, "/proc") || strings.HasPrefix(r, "/tmp") || strings.HasPrefix(r, "/root") {
			t.Errorf("rule %q reaches beyond the system directories", r)
		}
	}
	// The command's own /proc entry, when given; a missing write path is an error.
	rules, _ = fsRules(confineSpec{}, fmt.Sprintf("/proc/%d", os.Getpid()))
	if !slices.Contains(rules, fsRule{Path: fmt.Sprintf("/proc/%d", os.Getpid()), Access: accessRead}) {
		t.Errorf("no rule for the command's own /proc entry: %v", rules)
	}
	if _, err := fsRules(confineSpec{Write: []string{p("no-such-dir")}}, ""); err == nil {
		t.Error("a missing write path is no error")
	}
	// A grant equal to a denied path is dropped; one of a denied path's parents with it.
	rules, _ = fsRules(confineSpec{Read: []string{p("home")}, Deny: []string{p("home")}}, "")
	for _, r := range rules {
		if within(r.Path, p("home")) {
			t.Errorf("rule %v inside the denied home", r)
		}
	}
}

func TestSecretFree(t *testing.T) {
	got := secretFree([]string{"PATH=/bin", "MUR_OPERATOR_TOKEN=a", "MUR_FORMATION_TOKEN=b", "MUR_PEER_TOKEN_X=c",
		"MUR_MEMBER=m", "X=has-the-secret-inside", "LANG=C.UTF-8"}, "the-secret")
	if diff := cmp.Diff([]string{"PATH=/bin", "MUR_MEMBER=m", "LANG=C.UTF-8"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// probeScript is a shell script that tries to read each secret of a formation laid out under root
// (startSession's layout: the data directory with its tokens and task store, the records) and the
// home directory, the member's /proc entry and a door; it prints one line per try.
func probeScript(root, home, granted string, door int) string {
	tries := [][2]string{
		{"operator-token", filepath.Join(root, "operator.token")},
		{"formation-token", filepath.Join(root, "formation.token")},
		{"task-store", filepath.Join(root, "tasks.db")},
		{"other-records", filepath.Join(root, "records", "ses_other", "trace.jsonl")},
		{"home", filepath.Join(home, "planted")},
		{"member-environ", fmt.Sprintf("/proc/%d/environ", os.Getpid())},
		{"member-cmdline", fmt.Sprintf("/proc/%d/cmdline", os.Getpid())},
		{"capsule", filepath.Join(root, "capsule", "murmur.yaml")},
		{"granted", granted},
	}
	var b strings.Builder
	b.WriteString(`try() { if out=$(cat "$2" 2>/dev/null); then echo "$1: read $out"; else echo "$1: refused"; fi; }; `)
	b.WriteString(`echo mine > in.txt; try workdir in.txt; `)
	for _, tr := range tries {
		fmt.Fprintf(&b, "try %s %s; ", tr[0], tr[1])
	}
	// The command's own /proc entry, opened by the command itself.
	b.WriteString(`if read -r l < /proc/self/status; then echo "own-proc: read"; else echo "own-proc: refused"; fi 2>/dev/null; `)
	fmt.Fprintf(&b, `if bash -c "exec 3<>/dev/tcp/127.0.0.1/%d" 2>/dev/null; then echo "door: connected"; else echo "door: refused"; fi; `, door)
	b.WriteString(`env | grep -c TOKEN | sed "s/^/token-vars: /"`)
	return b.String()
}

// TestCommandsCannotReadSecrets runs a probe as a shell binary and as a script capsule's command: each
// secret is refused, what the command may read is read, and the door is reached only with
// capabilities.shell.network, by a network namespace or by Landlock's TCP rules.
func TestCommandsCannotReadSecrets(t *testing.T) {
	if !LandlockAvailable() {
		t.Skip("this kernel does not enforce Landlock (W-SHELL-005)")
	}
	if _, err := os.Stat("/usr/bin/bash"); err != nil {
		t.Skip("no bash to try a TCP connect with")
	}
	const canary = "mur_canary_5e1f0a"
	t.Setenv("MUR_OPERATOR_TOKEN", canary)
	t.Setenv("MUR_FORMATION_TOKEN", canary)
	home := t.TempDir()
	t.Setenv("HOME", home)
	os.WriteFile(filepath.Join(home, "planted"), []byte(canary), 0o600)
	grantedDir := t.TempDir()
	granted := filepath.Join(grantedDir, "data.csv")
	os.WriteFile(granted, []byte("granted-content"), 0o644)
	door := httptest.NewServer(http.NotFoundHandler())
	defer door.Close()
	port := door.Listener.Addr().(*net.TCPAddr).Port

	host := probeIsolation()
	noNetNS := host
	noNetNS.netNS = 0
	for _, tc := range []struct {
		name    string
		iso     isolation
		skip    string
		grants  string // the capabilities.shell keys besides allow
		network bool
		door    bool // check the door alone: without Landlock, reads are the user's
	}{
		{"network namespace", host, map[bool]string{true: "no network namespace on this host"}[host.netNS == 0], "", false, false},
		{"Landlock TCP rules", noNetNS, map[bool]string{true: "this kernel's Landlock has no TCP rules"}[landlockABI() < landlockTCPABI], "", false, false},
		{"granted", host, "", "network: true, read: [" + grantedDir + "]", true, false},
		// Without Landlock at all, the network namespace alone keeps the door out of reach.
		{"network namespace without Landlock", host, map[bool]string{true: "no network namespace on this host"}[host.netNS == 0], "confine: false", false, true},
	} {
		for _, kind := range []string{"shell binary", "script capsule"} {
			t.Run(tc.name+"/"+kind, func(t *testing.T) {
				if tc.skip != "" {
					t.Skip(tc.skip)
				}
				// The probe is the task's text: the agent passes it to sh -c, the script capsule evals it.
				files := map[string]string{}
				shell := "{allow: [sh]"
				if tc.grants != "" {
					shell += ", " + tc.grants
				}
				shell += "}"
				if kind == "shell binary" {
					files["murmur.yaml"] = agentCapsule("capabilities:\n  shell: " + shell + "\n")
					files["script.yaml"] = "rules:\n  - match: ''\n    turns:\n      - call: [{tool: sh, input: {args: ['-c', '{{.task}}']}}]\n      - say: '{{(index .results 0).text}}'\n"
				} else {
					files["murmur.yaml"] = "name: s\nscript: {command: [sh, -c, 'read -r body; eval \"$body\"']}\ncapabilities:\n  shell: " + shell + "\n"
				}
				s, root := startSession(t, files, sessionOpts{confine: true, token: canary, isolate: func() isolation { return tc.iso }})
				for _, f := range []string{"operator.token", "formation.token"} {
					os.WriteFile(filepath.Join(root, f), []byte(canary+"\n"), 0o600)
				}
				os.MkdirAll(filepath.Join(root, "records", "ses_other"), 0o700)
				os.WriteFile(filepath.Join(root, "records", "ses_other", "trace.jsonl"), []byte(canary), 0o600)
				got := answer(s.run(t, probeScript(root, home, granted, port), Origin{}))
				want := map[string]string{
					"operator-token": "refused", "formation-token": "refused", "task-store": "refused",
					"other-records": "refused", "home": "refused", "member-environ": "refused", "member-cmdline": "refused",
					"capsule": "read", "workdir": "read mine", "own-proc": "read", "granted": "refused", "door": "refused",
					"token-vars": "0",
				}
				if tc.network {
					want["door"], want["granted"] = "connected", "read granted-content"
				}
				if tc.door {
					want = map[string]string{"door": "refused"}
				}
				for k, v := range want {
					if !strings.Contains(got, "\n"+k+": "+v) && !strings.HasPrefix(got, k+": "+v) {
						t.Errorf("%s: want %q in:\n%s", k, v, got)
					}
				}
				if strings.Contains(got, canary) && !tc.door {
					t.Errorf("the canary token reached the result:\n%s", got)
				}
			})
		}
	}
}

// TestDoneCheckIsConfined: lifecycle.done_check runs through the same runner: it passes only when its
// try at the operator token beside the workdir is refused.
func TestDoneCheckIsConfined(t *testing.T) {
	if !LandlockAvailable() {
		t.Skip("this kernel does not enforce Landlock (W-SHELL-005)")
	}
	s, root := startSession(t, map[string]string{
		"murmur.yaml": agentCapsule("lifecycle:\n  done_check: {command: [sh, -c, 'cat ../operator.token && exit 1; exit 0'], limit: 1}\n"),
		"script.yaml": "rules:\n  - match: ''\n    turns:\n      - say: done\n",
	}, sessionOpts{confine: true})
	os.WriteFile(filepath.Join(root, "operator.token"), []byte("mur_canary_done_check\n"), 0o600)
	task := s.run(t, "x", Origin{})
	if answer(task) != "done" || strings.Contains(status(task), "canary") {
		t.Errorf("task %s %q: the done_check read the token", task.Status.State, status(task))
	}
}

// BenchmarkScriptTaskConfinement reports what a script capsule's task costs run the old way (the
// process group alone, no helper) and confined (helper, Landlock, PID and network namespaces, cgroup),
// alternating the two so a loaded machine weighs on both alike; the ratio is confined over direct.
func BenchmarkScriptTaskConfinement(b *testing.B) {
	capsule := map[string]string{"murmur.yaml": "name: s\nscript: {command: [cat]}\n"}
	direct, _ := startSession(b, capsule, sessionOpts{isolate: func() isolation { return isolation{} }})
	confined, _ := startSession(b, capsule, sessionOpts{confine: true})
	var took [2]time.Duration
	for b.Loop() {
		for i, s := range []*testSession{direct, confined} {
			start := time.Now()
			if task := s.run(b, "x", Origin{}); answer(task) != "x" {
				b.Fatalf("task: %s %q", task.Status.State, status(task))
			}
			took[i] += time.Since(start)
		}
	}
	b.ReportMetric(float64(took[0].Microseconds())/float64(b.N)/1000, "ms/direct")
	b.ReportMetric(float64(took[1].Microseconds())/float64(b.N)/1000, "ms/confined")
	b.ReportMetric(float64(took[1])/float64(took[0]), "confined/direct")
}
