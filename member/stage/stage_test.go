package stage

import (
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/murmur-run/murmur/member/capsule"
	"github.com/murmur-run/murmur/member/sandbox"
)

func TestIsolationFindings(t *testing.T) {
	c := &capsule.Capsule{Path: "/x/murmur.yaml"}
	codes := func(iso sandbox.Isolation) []string {
		var out []string
		for _, f := range isolationFindings(c, "m", iso) {
			if !strings.HasPrefix(f.Message, "/x/murmur.yaml: ") {
				t.Errorf("%s does not name the capsule: %s", f.Code, f.Message)
			}
			out = append(out, f.Code)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		iso  sandbox.Isolation
		want []string
	}{
		{"nothing", sandbox.Isolation{}, []string{CodeShellReach, CodeShellMemory}},
		{"PID namespace only", sandbox.Isolation{PidNS: syscall.CLONE_NEWPID}, []string{CodeShellMemory}},
		{"cgroup without memory", sandbox.Isolation{KillBase: "/sys/fs/cgroup/unified"}, []string{CodeShellMemory}},
		{"v1 memory only", sandbox.Isolation{MemBase: "/sys/fs/cgroup/memory", MemV1: true}, []string{CodeShellReach}},
		{"everything", sandbox.Isolation{PidNS: syscall.CLONE_NEWPID, KillBase: "/a", MemBase: "/a"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, codes(tc.iso)); diff != "" {
				t.Errorf("codes (-want +got):\n%s", diff)
			}
		})
	}
}

// The probe leaves nothing behind, and a command's cgroups are gone once it has ended.

func TestConfinementFindings(t *testing.T) {
	shell := &capsule.Capsule{Path: "/x/murmur.yaml", Inference: &capsule.Inference{}}
	shell.Capabilities.Shell.Allow = []string{"sh"}
	script := &capsule.Capsule{Path: "/x/murmur.yaml", Script: &capsule.ScriptSpec{Command: []string{"./a.sh"}}}
	off := *script
	off.Capabilities.Shell.Confine = ptrTo(false)
	netOK := *script
	netOK.Capabilities.Shell.Network = true
	all := sandbox.Isolation{PidNS: syscall.CLONE_NEWPID, NetNS: syscall.CLONE_NEWNET, KillBase: "/c", MemBase: "/c"}
	noNet := all
	noNet.NetNS = 0
	for _, tc := range []struct {
		name string
		c    *capsule.Capsule
		abi  int
		iso  sandbox.Isolation
		want []string
	}{
		{"everything", shell, 7, all, nil},
		{"no Landlock", shell, 0, all, []string{CodeShellOpen, CodeShellReads}},
		{"no Landlock, no namespaces", shell, 0, sandbox.Isolation{}, []string{CodeShellOpen, CodeShellReads, CodeShellReach, CodeShellMemory, CodeShellNetwork}},
		// A script command has no memory limit unless memory_mb sets one: nothing to warn about.
		{"script, nothing", script, 0, sandbox.Isolation{}, []string{CodeShellOpen, CodeShellReads, CodeShellReach, CodeShellNetwork}},
		{"Landlock TCP rules stand in for the namespace", script, 4, noNet, nil},
		{"Landlock without TCP rules", script, 3, noNet, []string{CodeShellNetwork}},
		{"confine: false", &off, 7, noNet, []string{CodeShellOpen, CodeShellReads, CodeShellNetwork}},
		{"network granted", &netOK, 3, noNet, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, f := range confinementFindings(tc.c, "m", tc.abi, tc.iso) {
				if !strings.HasPrefix(f.Message, "/x/murmur.yaml: ") || f.Member != "m" {
					t.Errorf("%s does not name the capsule and member: %+v", f.Code, f)
				}
				got = append(got, f.Code)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("codes (-want +got):\n%s", diff)
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }
