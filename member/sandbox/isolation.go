package sandbox

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Isolation is what this host lets the runtime put around a shell command, so that ending the command
// ends every process it started and its memory limit is the kernel's to enforce and to report. It is
// probed once per session (probeIsolation); each field falls back on its own.
type Isolation struct {
	// pidNS is the clone flags that give a command a PID namespace of its own, whose PID 1 is the
	// command's init (confineInit): when the command ends, so does the init, and the kernel kills every
	// process the command started, setsid escapers included.
	// CLONE_NEWPID as root; CLONE_NEWUSER|CLONE_NEWPID (the user mapped to itself) otherwise; 0 when
	// neither works here.
	PidNS uintptr
	// netNS is the clone flags that, added to pidNS, give a command a network namespace of its own as
	// well (with only a loopback interface, down): CLONE_NEWNET, with CLONE_NEWUSER where only a user
	// namespace allows it; 0 when no network namespace can be made here.
	NetNS uintptr
	// killBase is a cgroup v2 directory the runtime may make children in; each command runs in a child
	// of its own, and cgroup.kill ends everything in it. "" when there is none.
	KillBase string
	// memBase is where a command's memory cgroup is made: killBase itself when cgroup v2 delegates the
	// memory controller to its children, else the v1 memory hierarchy (memV1). "" when neither is
	// writable: the memory limit is then an address-space limit (RLIMIT_AS), which a program sees as
	// failed allocations and the runtime cannot attribute.
	MemBase string
	MemV1   bool
}

// TreeKill reports whether ending a command reaches processes that left its process group.
func (i Isolation) TreeKill() bool { return i.PidNS != 0 || i.KillBase != "" }

// Probe finds out what this host allows: it starts true (from the trusted PATH) in a PID
// namespace, then in a PID and a network namespace, and makes (and removes) a probe cgroup.
func Probe() Isolation {
	var iso Isolation
	trueBin, err := ResolveShell("true")
	starts := func(flags uintptr) bool {
		if err != nil {
			return false // nothing to start: no namespace is assumed
		}
		cmd := exec.Command(trueBin)
		cmd.SysProcAttr = PidNSAttr(flags)
		return cmd.Run() == nil
	}
	for _, flags := range pidNSFlags() {
		if starts(flags) {
			iso.PidNS = flags
			break
		}
	}
	for _, flags := range netNSFlags(iso.PidNS) {
		if starts(iso.PidNS | flags) {
			iso.NetNS = flags
			break
		}
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	own, _ := os.ReadFile("/proc/self/cgroup")
	if dir := ownCgroup(mounts, own, "cgroup2", ""); dir != "" {
		if probe, err := os.MkdirTemp(dir, "mur-probe-"); err == nil {
			if fileExists(filepath.Join(probe, "cgroup.kill")) {
				iso.KillBase = dir
				if fileExists(filepath.Join(probe, "memory.max")) {
					iso.MemBase = dir
				}
			}
			_ = os.Remove(probe) // an empty cgroup: left behind, it holds nothing and limits nothing
		}
	}
	if iso.MemBase == "" {
		if dir := ownCgroup(mounts, own, "cgroup", "memory"); dir != "" {
			if probe, err := os.MkdirTemp(dir, "mur-probe-"); err == nil {
				if fileExists(filepath.Join(probe, "memory.limit_in_bytes")) {
					iso.MemBase, iso.MemV1 = dir, true
				}
				_ = os.Remove(probe) // an empty cgroup: left behind, it holds nothing and limits nothing
			}
		}
	}
	return iso
}

// pidNSFlags lists the clone flags to try for a PID namespace, the plainest first.
func pidNSFlags() []uintptr {
	if os.Geteuid() == 0 {
		return []uintptr{syscall.CLONE_NEWPID, syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID}
	}
	return []uintptr{syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID}
}

// netNSFlags lists the clone flags to add to the PID namespace flags pid (0: none) for a network
// namespace, the plainest first.
func netNSFlags(pid uintptr) []uintptr {
	var out []uintptr
	if pid&syscall.CLONE_NEWUSER != 0 || os.Geteuid() == 0 {
		out = append(out, syscall.CLONE_NEWNET)
	}
	if pid&syscall.CLONE_NEWUSER == 0 {
		out = append(out, syscall.CLONE_NEWUSER|syscall.CLONE_NEWNET)
	}
	return out
}

// PidNSAttr is the SysProcAttr of a command started in its own process group and, with flags, its own
// PID (and network) namespace; in a new user namespace the user and group map to themselves, so files keep their owners.
func PidNSAttr(flags uintptr) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Cloneflags: flags}
	if flags&syscall.CLONE_NEWUSER != 0 {
		uid, gid := os.Geteuid(), os.Getegid()
		a.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		a.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
	}
	return a
}

// ownCgroup returns the directory of this process's own cgroup in the hierarchy mounted with fstype
// (cgroup2, or cgroup with the v1 controller named), from /proc/self/mountinfo and /proc/self/cgroup; ""
// when there is none.
func ownCgroup(mountinfo, cgroup []byte, fstype, controller string) string {
	var path string
	for _, line := range strings.Split(string(cgroup), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if (fstype == "cgroup2" && parts[0] == "0" && parts[1] == "") ||
			(fstype == "cgroup" && containsField(parts[1], controller)) {
			path = parts[2]
			break
		}
	}
	if path == "" {
		return ""
	}
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if sep < 5 || len(fields) < sep+4 || fields[sep+1] != fstype {
			continue
		}
		if fstype == "cgroup" && !containsField(fields[sep+3], controller) {
			continue
		}
		root, point := fields[3], fields[4]
		rel := path
		if root != "/" {
			if !strings.HasPrefix(path+"/", root+"/") {
				continue
			}
			rel = strings.TrimPrefix(path, root)
		}
		return filepath.Join(point, rel)
	}
	return ""
}

func containsField(list, name string) bool {
	for _, f := range strings.Split(list, ",") {
		if f == name {
			return true
		}
	}
	return false
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// Cgroups is the cgroups one command runs in.
type Cgroups struct {
	Kill  string // the v2 cgroup: cgroup.kill ends the whole tree; "" none
	Mem   string // the cgroup holding the memory limit; "" none
	memV1 bool
	Extra []string // cgroups the command must join itself (v1 ones), before it executes
	Fd    int      // an open descriptor of kill, for starting the command inside it; -1 none
}

// NewCgroups makes the cgroups of the command with work id id and sets its memory limit in them.
// When no memory cgroup could be made, the caller applies the limit as RLIMIT_AS instead.
func NewCgroups(iso Isolation, id string, memBytes uint64) (*Cgroups, error) {
	cg := &Cgroups{Fd: -1}
	name := "mur-" + id
	if iso.KillBase != "" {
		dir := filepath.Join(iso.KillBase, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, fmt.Errorf("making the command's cgroup: %w", err)
		}
		cg.Kill = dir
		fd, err := syscall.Open(dir, syscall.O_DIRECTORY|syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != nil {
			_ = cg.Remove() // cleanup on a failed path: the error returned is the one to report
			return nil, fmt.Errorf("opening the command's cgroup: %w", err)
		}
		cg.Fd = fd
	}
	if iso.MemBase != "" && memBytes > 0 {
		limit := strconv.FormatUint(memBytes, 10)
		if iso.MemV1 {
			dir := filepath.Join(iso.MemBase, name)
			if err := os.Mkdir(dir, 0o755); err != nil {
				_ = cg.Remove() // cleanup on a failed path: the error returned is the one to report
				return nil, fmt.Errorf("making the command's memory cgroup: %w", err)
			}
			cg.Mem, cg.memV1 = dir, true
			cg.Extra = append(cg.Extra, dir)
			err := os.WriteFile(filepath.Join(dir, "memory.limit_in_bytes"), []byte(limit), 0)
			if err == nil && fileExists(filepath.Join(dir, "memory.memsw.limit_in_bytes")) {
				// No swapping past the limit: memory+swap gets the same bound.
				err = os.WriteFile(filepath.Join(dir, "memory.memsw.limit_in_bytes"), []byte(limit), 0)
			}
			if err != nil {
				_ = cg.Remove() // cleanup on a failed path: the error returned is the one to report
				return nil, fmt.Errorf("setting the command's memory limit: %w", err)
			}
		} else if cg.Kill != "" {
			cg.Mem = cg.Kill
			err := os.WriteFile(filepath.Join(cg.Mem, "memory.max"), []byte(limit), 0)
			if err == nil {
				// One process over the limit ends the whole command, not just its largest process; no
				// swapping past it. A kernel may lack either file (memory.oom.group before Linux 4.19,
				// memory.swap.max without swap accounting): memory.max holds without them.
				_ = os.WriteFile(filepath.Join(cg.Mem, "memory.oom.group"), []byte("1"), 0)
				_ = os.WriteFile(filepath.Join(cg.Mem, "memory.swap.max"), []byte("0"), 0)
			}
			if err != nil {
				_ = cg.Remove() // cleanup on a failed path: the error returned is the one to report
				return nil, fmt.Errorf("setting the command's memory limit: %w", err)
			}
		}
	}
	return cg, nil
}

// KillAll ends every process in the command's cgroups and waits, briefly, until none is left.
func (cg *Cgroups) KillAll() {
	if cg.Kill != "" {
		// Failing, it leaves the processes to the SIGKILL of each below.
		_ = os.WriteFile(filepath.Join(cg.Kill, "cgroup.kill"), []byte("1"), 0)
	}
	deadline := time.Now().Add(LingerWait)
	for _, dir := range append([]string{cg.Kill}, cg.Extra...) {
		if dir == "" {
			continue
		}
		for time.Now().Before(deadline) {
			pids := CgroupPIDs(dir)
			if len(pids) == 0 {
				break
			}
			for _, pid := range pids { // v1 has no cgroup.kill; v2 needs none of this but is waited for too
				_ = syscall.Kill(pid, syscall.SIGKILL) // it may have exited already (ESRCH): nothing to do
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// CgroupPIDs returns the processes in the cgroup at dir, read from its cgroup.procs; none when it cannot
// be read.
func CgroupPIDs(dir string) []int {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// HoldsPipe reports whether a process left in the command's cgroups holds the pipe its output is read from.
func (cg *Cgroups) HoldsPipe(r *os.File) bool {
	fi, err := r.Stat()
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	want := fmt.Sprintf("pipe:[%d]", st.Ino)
	for _, dir := range append([]string{cg.Kill}, cg.Extra...) {
		if dir == "" {
			continue
		}
		for _, pid := range CgroupPIDs(dir) {
			fds := fmt.Sprintf("/proc/%d/fd", pid)
			entries, _ := os.ReadDir(fds)
			for _, e := range entries {
				if link, err := os.Readlink(filepath.Join(fds, e.Name())); err == nil && link == want {
					return true
				}
			}
		}
	}
	return false
}

// OomKilled reports whether the kernel killed a process of the command for its memory limit.
func (cg *Cgroups) OomKilled() bool {
	if cg.Mem == "" {
		return false
	}
	file := "memory.events"
	if cg.memV1 {
		file = "memory.oom_control"
	}
	b, err := os.ReadFile(filepath.Join(cg.Mem, file))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == "oom_kill" {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n > 0
		}
	}
	return false
}

// Remove closes the descriptor and removes the command's (emptied) cgroups.
func (cg *Cgroups) Remove() error {
	if cg.Fd >= 0 {
		_ = syscall.Close(cg.Fd) // a directory's descriptor: nothing was written through it
		cg.Fd = -1
	}
	dirs := []string{cg.Kill}
	if cg.Mem != cg.Kill { // under cgroup v2 they are one cgroup
		dirs = append(dirs, cg.Mem)
	}
	var errs []error
	for _, dir := range dirs {
		if dir == "" {
			continue
		}
		if err := os.Remove(dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
