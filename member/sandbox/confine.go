package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"unsafe"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// ConfineCommand is the hidden first argument that makes the mur binary the confining helper. The
// helper runs twice per command: first as the command's init (confineInit), the process mur starts,
// which starts itself again as its one child and stays; that child sets the command's limits and its
// Landlock rules on itself, then executes the command in its place (confineExec).
const ConfineCommand = "_confine"

// envConfine carries the helper's instructions (a confineSpec as JSON) in its environment; the helper
// removes it before executing the command.
const envConfine = "MUR_CONFINE"

// envConfineExec marks the helper's second run, the one that becomes the command; it is removed too.
const envConfineExec = "MUR_CONFINE_EXEC"

// Spec is what the helper sets up before it executes a command.
type Spec struct {
	// Landlock applies the rule set fsRules computes (and the TCP rules unless Network); false leaves
	// the filesystem and the network as this user has them.
	Landlock bool `json:"landlock,omitempty"`
	// Read lists paths the command may read and execute, besides the system ones (systemReadPaths).
	Read []string `json:"read,omitempty"`
	// Write lists paths the command may read, write, create in and remove from.
	Write []string `json:"write,omitempty"`
	// Deny lists paths no rule may reach: a Read or Write path that contains one is granted as its
	// parts that do not (Landlock has no deny rule).
	Deny []string `json:"deny,omitempty"`
	// Network keeps TCP; without it, a Landlock of ABI 4 or later refuses every TCP bind and connect.
	Network bool `json:"network,omitempty"`
	// ConnectPorts are the TCP ports a command without Network may still connect to (a harness's
	// loopback tool server); Landlock rules are by port.
	ConnectPorts []int `json:"connect_ports,omitempty"`
	// Mem is the address-space limit in bytes; 0: none.
	Mem uint64 `json:"mem,omitempty"`
	// Cgroups are the cgroup directories to join before executing (cgroup v1 ones).
	Cgroups []string `json:"cgroups,omitempty"`
	// Kill is the command's cgroup v2 directory ("" none), and Parent mur's PID: an init without a PID
	// namespace that outlives mur writes Kill's cgroup.kill (confineInit).
	Kill   string `json:"kill,omitempty"`
	Parent int    `json:"parent,omitempty"`
}

// systemReadPaths are the directories programs need to run, read and executed by every confined
// command; those missing on a host are left out.
var systemReadPaths = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"}

// The device nodes a confined command may use: the first three read and written, the others read.
var (
	deviceRW   = []string{"/dev/null", "/dev/zero", "/dev/full"}
	deviceRead = []string{"/dev/urandom", "/dev/random"}
)

// fsAccess is a class of Landlock rights a rule grants.
type fsAccess int

const (
	accessRead   fsAccess = iota // read and execute
	accessWrite                  // everything
	accessDevice                 // read and write an existing file
)

func (a fsAccess) String() string {
	return [...]string{"read", "write", "device"}[a]
}

// fsRule grants one class of rights beneath one path.
type fsRule struct {
	Path   string
	Access fsAccess
}

// LandlockAvailable reports whether the kernel enforces Landlock, so confinement can be applied.
func LandlockAvailable() bool { return LandlockABI() >= 1 }

// LandlockABI is the kernel's Landlock ABI version; 0 when it has none (or a seccomp filter hides it).
func LandlockABI() int {
	v, err := llsys.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	return v
}

// LandlockTCPABI is the first Landlock ABI with rules for TCP bind and connect (Linux 6.7).
const LandlockTCPABI = 4

// fsRules computes the rules of a confined command: the system directories, spec's Read and Write
// paths, the device nodes and procSelf (the command's own /proc entry; "" for none), every one with
// its symbolic links resolved. A path inside a Deny path is kept: it is granted on purpose, and is
// narrower (the workdir inside the data directory). A path equal to a Deny path is dropped, and one
// that contains a Deny path is replaced by its entries that are not on the way to it, recursively, so
// the rules reach everything beneath it but the Deny path; symbolic links among those entries are left
// out, so none can lead back to it. Missing system, device and Read paths are left out; a missing Write
// path is an error.
func fsRules(spec Spec, procSelf string) ([]fsRule, error) {
	var deny []string
	for _, d := range spec.Deny {
		if d == "" {
			continue
		}
		if r, err := filepath.EvalSymlinks(d); err == nil {
			d = r
		}
		deny = append(deny, filepath.Clean(d))
	}
	var out []fsRule
	var errs []error
	add := func(path string, access fsAccess, required bool) {
		resolved, err := filepath.EvalSymlinks(path)
		if err != nil {
			if required {
				errs = append(errs, fmt.Errorf("%s: %w", path, err))
			}
			return
		}
		out = append(out, carve(resolved, access, deny)...)
	}
	for _, p := range systemReadPaths {
		add(p, accessRead, false)
	}
	if spec.Network {
		// Name resolution reads it, and it is often a link out of /etc (into /run).
		add("/etc/resolv.conf", accessRead, false)
	}
	for _, p := range spec.Read {
		add(p, accessRead, false)
	}
	for _, p := range spec.Write {
		add(p, accessWrite, true)
	}
	for _, p := range deviceRW {
		add(p, accessDevice, false)
	}
	for _, p := range deviceRead {
		add(p, accessRead, false)
	}
	if procSelf != "" {
		add(procSelf, accessRead, false)
	}
	return out, errors.Join(errs...)
}

// Within reports whether path is dir or beneath it; both are clean and absolute.
func Within(path, dir string) bool {
	return path == dir || dir == "/" || strings.HasPrefix(path, dir+"/")
}

// carve grants path, less every deny path it contains.
func carve(path string, access fsAccess, deny []string) []fsRule {
	inside := false
	for _, d := range deny {
		if d == path {
			return nil
		}
		if Within(d, path) {
			inside = true
		}
	}
	if !inside {
		return []fsRule{{Path: path, Access: access}}
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil
	}
	var out []fsRule
	for _, e := range entries {
		if e.Type()&fs.ModeSymlink != 0 {
			continue
		}
		out = append(out, carve(filepath.Join(path, e.Name()), access, deny)...)
	}
	return out
}

// The Landlock rights of each access class, for a directory and for any other file.
const (
	llRead = llsys.AccessFSExecute | llsys.AccessFSReadFile | llsys.AccessFSReadDir
	llFile = llsys.AccessFSExecute | llsys.AccessFSReadFile | llsys.AccessFSWriteFile | llsys.AccessFSTruncate |
		llsys.AccessFSIoctlDev
)

// restrictThread confines the calling thread, and so the program it executes, to rules; without
// network, it may neither bind nor connect a TCP socket (Landlock ABI 4), nor reach an abstract Unix
// socket made outside it (ABI 6). It may never signal a process outside it (ABI 6). Only this thread
// is restricted (not the whole process, as the library's RestrictPaths does): that works the same
// wherever the helper runs, in a PID namespace or not, and the thread is the one that executes the
// command.
func restrictThread(rules []fsRule, network bool, connectPorts []int) error {
	abi, err := llsys.LandlockGetABIVersion()
	if err != nil {
		return err
	}
	all := uint64(llsys.AccessFSExecute | llsys.AccessFSWriteFile | llsys.AccessFSReadFile | llsys.AccessFSReadDir |
		llsys.AccessFSRemoveDir | llsys.AccessFSRemoveFile | llsys.AccessFSMakeChar | llsys.AccessFSMakeDir |
		llsys.AccessFSMakeReg | llsys.AccessFSMakeSock | llsys.AccessFSMakeFifo | llsys.AccessFSMakeBlock | llsys.AccessFSMakeSym)
	if abi >= 2 {
		all |= llsys.AccessFSRefer
	}
	if abi >= 3 {
		all |= llsys.AccessFSTruncate
	}
	if abi >= 5 {
		all |= llsys.AccessFSIoctlDev
	}
	attr := llsys.RulesetAttr{HandledAccessFS: all}
	if !network && abi >= LandlockTCPABI {
		attr.HandledAccessNet = llsys.AccessNetBindTCP | llsys.AccessNetConnectTCP
	}
	if abi >= 6 {
		attr.Scoped = llsys.ScopeSignal
		if !network {
			attr.Scoped |= llsys.ScopeAbstractUnixSocket
		}
	}
	fd, err := llsys.LandlockCreateRuleset(&attr, 0)
	if err != nil {
		return err
	}
	defer func() { _ = syscall.Close(fd) }() // a ruleset: applied or not, nothing is lost with it
	for _, r := range rules {
		if err := addRule(fd, r, all); err != nil {
			return err
		}
	}
	if attr.HandledAccessNet != 0 {
		for _, port := range connectPorts {
			if err := llsys.LandlockAddNetPortRule(fd, &llsys.NetPortAttr{AllowedAccess: llsys.AccessNetConnectTCP, Port: uint64(port)}, 0); err != nil {
				return fmt.Errorf("allowing TCP port %d: %w", port, err)
			}
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return err
	}
	return llsys.LandlockRestrictSelf(fd, 0)
}

// addRule adds one rule to the ruleset fd, with the rights of its class that the kernel handles and
// that fit the file's type. A path that is gone, or is now a symbolic link, is skipped.
func addRule(fd int, r fsRule, handled uint64) error {
	pfd, err := syscall.Open(r.Path, unix.O_PATH|unix.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		if r.Access == accessWrite {
			return fmt.Errorf("%s: %w", r.Path, err)
		}
		return nil
	}
	defer func() { _ = syscall.Close(pfd) }() // an O_PATH descriptor: nothing to lose
	var st syscall.Stat_t
	if err := syscall.Fstat(pfd, &st); err != nil {
		return fmt.Errorf("%s: %w", r.Path, err)
	}
	if st.Mode&syscall.S_IFMT == syscall.S_IFLNK {
		return nil
	}
	var access uint64
	switch r.Access {
	case accessRead:
		access = llRead
	case accessWrite:
		access = handled
	case accessDevice:
		access = llFile &^ llsys.AccessFSExecute
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		access &= llFile
	}
	access &= handled
	if err := llsys.LandlockAddPathBeneathRule(fd, &llsys.PathBeneathAttr{AllowedAccess: access, ParentFd: pfd}, 0); err != nil {
		return fmt.Errorf("%s (%s): %w", r.Path, r.Access, err)
	}
	return nil
}

// ConfineMain runs the helper: args are the command's absolute path, its argv[0], then its arguments.
// As the command's init it exits with the command's exit status (128+N when signal N ended it); as the
// process that becomes the command it returns only on failure, with 126: the command could not be
// confined or started.
func ConfineMain(args []string) int {
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "mur _confine: needs the command's path and name")
		return 126
	}
	var env []string
	var spec Spec
	second := false
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case envConfine:
			if err := json.Unmarshal([]byte(v), &spec); err != nil {
				fmt.Fprintln(os.Stderr, "mur _confine: reading its instructions:", err)
				return 126
			}
		case envConfineExec:
			second = true
		default:
			env = append(env, kv)
		}
	}
	if !second {
		// The init exits as the command did, at once: os.Exit(0) would first pause for a second in a
		// race-enabled build (the race detector's end-of-program wait), after every command.
		syscall.Exit(confineInit(args, spec))
	}
	return confineExec(args[0], args[1:], env, spec)
}

// confineInit is the command's init: the first process of its PID namespace, where the host gives it
// one. The command must not be that PID 1, which the kernel shields from every signal it installed no
// handler for, SIGTERM included: stop's SIGTERM would never end `exec sleep`. So the init starts the
// helper again as its child, in its own process group (mur made it; a signal mur sends the group reaches
// the command directly), catches every signal itself (the group's SIGTERM, the command's `kill 0`) and
// drops it, reaps every process that ends up its child, and once the command has exited, exits with the
// command's status; as PID 1, its exit ends the namespace and every process left in it. Without a PID
// namespace, it also watches its parent: when mur dies, even by SIGKILL, it kills the command's cgroups
// and process group, which nothing else is left to do.
func confineInit(args []string, spec Spec) int {
	// Before anything that can fail or take time: until it is caught, SIGTERM would end the init (where
	// it is not PID 1) and leave the command without its init.
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs)
	// Parent death is signalled to the thread that asked for it: this goroutine keeps its thread.
	runtime.LockOSThread()
	watch := os.Getpid() != 1
	parent := spec.Parent
	if parent == 0 {
		parent = os.Getppid()
	}
	if watch {
		// mur starts an init without a PID namespace with no parent-death signal of its own, so that
		// this one, which the init catches, is the only one.
		if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGHUP), 0, 0, 0); err != nil {
			fmt.Fprintln(os.Stderr, "mur _confine: parent-death signal:", err)
			return 126
		}
		if os.Getppid() != parent {
			return 128 + int(syscall.SIGKILL) // mur is already gone: start nothing
		}
	}
	// This very binary, even if a newer one has replaced it on disk since; where /proc is not mounted,
	// the path mur started it by.
	exe := "/proc/self/exe"
	if _, err := os.Stat(exe); err != nil {
		exe = os.Args[0]
	}
	pid, err := syscall.ForkExec(exe, append([]string{os.Args[0], ConfineCommand}, args...), &syscall.ProcAttr{
		Env:   append(os.Environ(), envConfineExec+"=1"),
		Files: []uintptr{0, 1, 2},
		// Should the init die first, so does the command.
		Sys: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "mur _confine: starting %s: %v\n", args[0], err)
		return 126
	}
	// Its stdin is the command's alone: a command that stops reading it is not kept fed through ours.
	// Both descriptors are open, so Dup3 has nothing to fail on; at worst the init would keep the
	// command's stdin open, as a plain fork does. /dev/null is only read, and fd 0 keeps it open.
	if null, err := os.Open(os.DevNull); err == nil {
		_ = unix.Dup3(int(null.Fd()), 0, 0)
		_ = null.Close()
	}
	go func() {
		for range sigs {
			// A signal to the group reached the command too; any other is not the init's to act on. The
			// parent-death signal is the one to act on, recognised by the parent being gone.
			if watch && os.Getppid() != parent {
				killTree(spec)
			}
		}
	}()
	for {
		var ws syscall.WaitStatus
		wpid, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "mur _confine: waiting for the command:", err)
			return 126
		}
		if wpid != pid {
			continue // an orphan the init inherited, reaped
		}
		if ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ws.ExitStatus()
	}
}

// killTree ends everything the command started, for an init whose parent died: the processes in its
// cgroup v1 directories, then its cgroup v2 (cgroup.kill) and its process group, the init with them.
func killTree(spec Spec) {
	for _, d := range spec.Cgroups {
		for _, pid := range CgroupPIDs(d) {
			_ = syscall.Kill(pid, syscall.SIGKILL) // it may have exited already (ESRCH): nothing to do
		}
	}
	if spec.Kill != "" {
		// The parent is gone, so no one is left to tell; the process group's kill follows whatever this did.
		_ = os.WriteFile(filepath.Join(spec.Kill, "cgroup.kill"), []byte("1"), 0)
	}
	_ = syscall.Kill(0, syscall.SIGKILL) // it may have exited already (ESRCH): nothing to do
	syscall.Exit(128 + int(syscall.SIGKILL))
}

// confineExec becomes the command: it joins its cgroups, sets its Landlock rules and its memory limit,
// then executes it. It returns only on failure.
func confineExec(path string, argv, env []string, spec Spec) int {
	// Joined before the command executes, so nothing it starts is ever outside them. "0" is this
	// process, whatever its number in a PID namespace.
	for _, d := range spec.Cgroups {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte("0"), 0); err != nil {
			fmt.Fprintln(os.Stderr, "mur _confine: joining the command's cgroup:", err)
			return 126
		}
	}
	// Landlock restricts a thread and what it executes; this thread is the one that calls execve.
	runtime.LockOSThread()
	if spec.Landlock {
		// The command executes as this process: its own /proc entry is this one's.
		self := fmt.Sprintf("/proc/%d", os.Getpid())
		if pid, err := os.Readlink("/proc/self"); err == nil {
			self = filepath.Join("/proc", pid) // the PID in /proc's namespace, not in the command's
		}
		rules, err := fsRules(spec, self)
		if err == nil {
			err = restrictThread(rules, spec.Network, spec.ConnectPorts)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "mur _confine: confinement:", err)
			return 126
		}
	}
	// The address-space limit comes last, and nothing is allocated after it: this process's own runtime
	// may already use more address space than the limit allows (a race-enabled build always does), and
	// then fails at its next mapping. So execve's arguments are built first and it is called raw.
	pathp, err := syscall.BytePtrFromString(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "mur _confine: %s: %v\n", path, err)
		return 126
	}
	argvp, err := syscall.SlicePtrFromStrings(argv)
	if err == nil {
		var envp []*byte
		if envp, err = syscall.SlicePtrFromStrings(env); err == nil {
			if spec.Mem > 0 {
				lim := &syscall.Rlimit{Cur: spec.Mem, Max: spec.Mem}
				if err := syscall.Setrlimit(syscall.RLIMIT_AS, lim); err != nil {
					fmt.Fprintln(os.Stderr, "mur _confine: memory limit:", err)
					return 126
				}
			}
			_, _, errno := syscall.RawSyscall(syscall.SYS_EXECVE, uintptr(unsafe.Pointer(pathp)),
				uintptr(unsafe.Pointer(&argvp[0])), uintptr(unsafe.Pointer(&envp[0])))
			err = errno
		}
	}
	fmt.Fprintf(os.Stderr, "mur _confine: %s: %v\n", path, err)
	return 126
}

// Encode returns the spec as the helper's environment entry.
func (c Spec) Encode() string {
	b, _ := json.Marshal(c)
	return envConfine + "=" + string(b)
}
