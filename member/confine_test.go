package member

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/murmur-run/murmur/member/sandbox"
)

// TestFSRules checks which paths become which Landlock rules, and the carve-out of a data directory

// inside a granted directory (roster `capsule: .` beside `.murmur/`).

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
	if !sandbox.LandlockAvailable() {
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

	host := sandbox.Probe()
	noNetNS := host
	noNetNS.NetNS = 0
	for _, tc := range []struct {
		name    string
		iso     sandbox.Isolation
		skip    string
		grants  string // the capabilities.shell keys besides allow
		network bool
		door    bool // check the door alone: without Landlock, reads are the user's
	}{
		{"network namespace", host, map[bool]string{true: "no network namespace on this host"}[host.NetNS == 0], "", false, false},
		{"Landlock TCP rules", noNetNS, map[bool]string{true: "this kernel's Landlock has no TCP rules"}[sandbox.LandlockABI() < sandbox.LandlockTCPABI], "", false, false},
		{"granted", host, "", "network: true, read: [" + grantedDir + "]", true, false},
		// Without Landlock at all, the network namespace alone keeps the door out of reach.
		{"network namespace without Landlock", host, map[bool]string{true: "no network namespace on this host"}[host.NetNS == 0], "confine: false", false, true},
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
				s, root := startSession(t, files, sessionOpts{confine: true, token: canary, isolate: func() sandbox.Isolation { return tc.iso }})
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
	if !sandbox.LandlockAvailable() {
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
	direct, _ := startSession(b, capsule, sessionOpts{isolate: func() sandbox.Isolation { return sandbox.Isolation{} }})
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
