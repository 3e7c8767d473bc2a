package sandbox

import (
	"testing"

	"github.com/murmur-run/murmur/internal/ids"
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

func TestCgroupsAreRemoved(t *testing.T) {
	iso := Probe()
	if iso.KillBase == "" && iso.MemBase == "" {
		t.Skip("this host gives the runtime no cgroup")
	}
	cg, err := NewCgroups(iso, ids.NewWorkID(), 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	dirs := []string{cg.Kill, cg.Mem}
	if cg.OomKilled() {
		t.Error("a new cgroup reports an OOM kill")
	}
	if err := cg.Remove(); err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if d != "" && fileExists(d) {
			t.Errorf("%s is still there", d)
		}
	}
}
