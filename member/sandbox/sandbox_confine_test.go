package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

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

	spec := Spec{
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
		if Within(r.Path, root) {
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
		if !Within(r.Path, root) {
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
	rules, _ = fsRules(Spec{}, fmt.Sprintf("/proc/%d", os.Getpid()))
	if !slices.Contains(rules, fsRule{Path: fmt.Sprintf("/proc/%d", os.Getpid()), Access: accessRead}) {
		t.Errorf("no rule for the command's own /proc entry: %v", rules)
	}
	if _, err := fsRules(Spec{Write: []string{p("no-such-dir")}}, ""); err == nil {
		t.Error("a missing write path is no error")
	}
	// A grant equal to a denied path is dropped; one of a denied path's parents with it.
	rules, _ = fsRules(Spec{Read: []string{p("home")}, Deny: []string{p("home")}}, "")
	for _, r := range rules {
		if Within(r.Path, p("home")) {
			t.Errorf("rule %v inside the denied home", r)
		}
	}
}
