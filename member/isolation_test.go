package member

import (
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/murmur-run/murmur/member/capsule"
)

func TestOwnCgroup(t *testing.T) {
	const hybrid = `25 30 0:22 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
26 25 0:23 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
27 25 0:24 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
28 25 0:25 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`
	const hybridSelf = "4:memory:/process_api/83d6\n1:cpu:/\n0::/\n"
	const pure = `30 1 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
`
	const pureSelf = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/mur.scope\n"
	// In a container whose cgroup is bind-mounted: the mount's root is the container's own cgroup.
	const container = `40 35 0:26 /docker/abc /sys/fs/cgroup ro,nosuid - cgroup2 cgroup2 rw
`
	const containerSelf = "0::/docker/abc\n"
	for _, tc := range []struct {
		name, mountinfo, self, fstype, controller, want string
	}{
		{"hybrid v2", hybrid, hybridSelf, "cgroup2", "", "/sys/fs/cgroup/unified"},
		{"hybrid v1 memory", hybrid, hybridSelf, "cgroup", "memory", "/sys/fs/cgroup/memory/process_api/83d6"},
		{"hybrid v1 pids absent", hybrid, hybridSelf, "cgroup", "pids", ""},
		{"pure v2", pure, pureSelf, "cgroup2", "", "/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/app.slice/mur.scope"},
		{"pure v2 has no v1 memory", pure, pureSelf, "cgroup", "memory", ""},
		{"container", container, containerSelf, "cgroup2", "", "/sys/fs/cgroup"},
		{"no cgroup file", pure, "", "cgroup2", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ownCgroup([]byte(tc.mountinfo), []byte(tc.self), tc.fstype, tc.controller); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestIsolationFindings(t *testing.T) {
	c := &capsule.Capsule{Path: "/x/murmur.yaml"}
	codes := func(iso isolation) []string {
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
		iso  isolation
		want []string
	}{
		{"nothing", isolation{}, []string{CodeShellReach, CodeShellMemory}},
		{"PID namespace only", isolation{pidNS: syscall.CLONE_NEWPID}, []string{CodeShellMemory}},
		{"cgroup without memory", isolation{killBase: "/sys/fs/cgroup/unified"}, []string{CodeShellMemory}},
		{"v1 memory only", isolation{memBase: "/sys/fs/cgroup/memory", memV1: true}, []string{CodeShellReach}},
		{"everything", isolation{pidNS: syscall.CLONE_NEWPID, killBase: "/a", memBase: "/a"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, codes(tc.iso)); diff != "" {
				t.Errorf("codes (-want +got):\n%s", diff)
			}
		})
	}
}

// The probe leaves nothing behind, and a command's cgroups are gone once it has ended.
func TestCgroupsAreRemoved(t *testing.T) {
	iso := probeIsolation()
	if iso.killBase == "" && iso.memBase == "" {
		t.Skip("this host gives the runtime no cgroup")
	}
	cg, err := newCgroupSet(iso, newWorkID(), 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	dirs := []string{cg.kill, cg.mem}
	if cg.oomKilled() {
		t.Error("a new cgroup reports an OOM kill")
	}
	if err := cg.remove(); err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if d != "" && fileExists(d) {
			t.Errorf("%s is still there", d)
		}
	}
}

func TestConfinementFindings(t *testing.T) {
	shell := &capsule.Capsule{Path: "/x/murmur.yaml", Inference: &capsule.Inference{}}
	shell.Capabilities.Shell.Allow = []string{"sh"}
	script := &capsule.Capsule{Path: "/x/murmur.yaml", Script: &capsule.ScriptSpec{Command: []string{"./a.sh"}}}
	off := *script
	off.Capabilities.Shell.Confine = ptrTo(false)
	netOK := *script
	netOK.Capabilities.Shell.Network = true
	all := isolation{pidNS: syscall.CLONE_NEWPID, netNS: syscall.CLONE_NEWNET, killBase: "/c", memBase: "/c"}
	noNet := all
	noNet.netNS = 0
	for _, tc := range []struct {
		name string
		c    *capsule.Capsule
		abi  int
		iso  isolation
		want []string
	}{
		{"everything", shell, 7, all, nil},
		{"no Landlock", shell, 0, all, []string{CodeShellOpen, CodeShellReads}},
		{"no Landlock, no namespaces", shell, 0, isolation{}, []string{CodeShellOpen, CodeShellReads, CodeShellReach, CodeShellMemory, CodeShellNetwork}},
		// A script command has no memory limit unless memory_mb sets one: nothing to warn about.
		{"script, nothing", script, 0, isolation{}, []string{CodeShellOpen, CodeShellReads, CodeShellReach, CodeShellNetwork}},
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
