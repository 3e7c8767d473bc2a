package member

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// ConfineCommand is the hidden first argument that makes the mur binary the confining helper: it sets
// the command's limits and write confinement on itself, then executes the command in its place.
const ConfineCommand = "_confine"

// The helper's instructions, in its environment; it removes them before executing the command.
const (
	envConfineWrite   = "MUR_CONFINE_WRITE" // directories the command may write, separated by ':'
	envConfineMem     = "MUR_CONFINE_MEM"   // the address-space limit in bytes; 0 or unset: none
	envConfineLock    = "MUR_CONFINE_LANDLOCK"
	envConfineCgroups = "MUR_CONFINE_CGROUPS" // cgroup directories to join before executing, separated by ':'
)

// LandlockAvailable reports whether the kernel enforces Landlock, so confinement can be applied.
func LandlockAvailable() bool {
	v, err := llsys.LandlockGetABIVersion()
	return err == nil && v >= 1
}

// restrictThread confines the calling thread, and so the program it executes: read and execute
// everywhere, write only under the given directories and to /dev/null, /dev/zero and /dev/full. Only
// this thread is restricted (not the whole process, as the library's RestrictPaths does): that works the
// same when the helper is PID 1 of a PID namespace, where restricting every thread does not.
func restrictThread(write []string) error {
	abi, err := llsys.LandlockGetABIVersion()
	if err != nil {
		return err
	}
	all := uint64(llsys.AccessFSExecute | llsys.AccessFSWriteFile | llsys.AccessFSReadFile | llsys.AccessFSReadDir |
		llsys.AccessFSRemoveDir | llsys.AccessFSRemoveFile | llsys.AccessFSMakeChar | llsys.AccessFSMakeDir |
		llsys.AccessFSMakeReg | llsys.AccessFSMakeSock | llsys.AccessFSMakeFifo | llsys.AccessFSMakeBlock | llsys.AccessFSMakeSym)
	file := uint64(llsys.AccessFSReadFile | llsys.AccessFSWriteFile)
	if abi >= 2 {
		all |= llsys.AccessFSRefer
	}
	if abi >= 3 {
		all |= llsys.AccessFSTruncate
		file |= llsys.AccessFSTruncate
	}
	if abi >= 5 {
		all |= llsys.AccessFSIoctlDev
		file |= llsys.AccessFSIoctlDev
	}
	read := uint64(llsys.AccessFSExecute | llsys.AccessFSReadFile | llsys.AccessFSReadDir)
	fd, err := llsys.LandlockCreateRuleset(&llsys.RulesetAttr{HandledAccessFS: all}, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	add := func(path string, access uint64, optional bool) error {
		pfd, err := syscall.Open(path, unix.O_PATH|syscall.O_CLOEXEC, 0)
		if err != nil {
			if optional {
				return nil
			}
			return fmt.Errorf("%s: %w", path, err)
		}
		defer syscall.Close(pfd)
		return llsys.LandlockAddPathBeneathRule(fd, &llsys.PathBeneathAttr{AllowedAccess: access, ParentFd: pfd}, 0)
	}
	if err := add("/", read, false); err != nil {
		return err
	}
	for _, d := range write {
		if err := add(filepath.Clean(d), all, false); err != nil {
			return err
		}
	}
	for _, f := range []string{"/dev/null", "/dev/zero", "/dev/full"} {
		if err := add(f, file, true); err != nil {
			return err
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return err
	}
	return llsys.LandlockRestrictSelf(fd, 0)
}

// ConfineMain runs the helper: args are the command's absolute path, its argv[0], then its arguments.
// It returns only on failure, with the exit code to use (126: could not be confined or executed).
func ConfineMain(args []string) int {
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "mur _confine: needs the command's path and name")
		return 126
	}
	path, argv := args[0], args[1:]
	var env []string
	var write []string
	var mem uint64
	var cgroups []string
	lock := false
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case envConfineWrite:
			for _, d := range strings.Split(v, ":") {
				if d != "" {
					write = append(write, d)
				}
			}
		case envConfineMem:
			mem, _ = strconv.ParseUint(v, 10, 64)
		case envConfineLock:
			lock = v == "1"
		case envConfineCgroups:
			for _, d := range strings.Split(v, ":") {
				if d != "" {
					cgroups = append(cgroups, d)
				}
			}
		default:
			env = append(env, kv)
		}
	}
	// Joined before the command executes, so nothing it starts is ever outside them. "0" is this
	// process, whatever its number in a PID namespace.
	for _, d := range cgroups {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte("0"), 0); err != nil {
			fmt.Fprintln(os.Stderr, "mur _confine: joining the command's cgroup:", err)
			return 126
		}
	}
	if mem > 0 {
		lim := &syscall.Rlimit{Cur: mem, Max: mem}
		if err := syscall.Setrlimit(syscall.RLIMIT_AS, lim); err != nil {
			fmt.Fprintln(os.Stderr, "mur _confine: memory limit:", err)
			return 126
		}
	}
	// Landlock restricts a thread and what it executes; this thread is the one that calls execve.
	runtime.LockOSThread()
	if lock {
		if err := restrictThread(write); err != nil {
			fmt.Fprintln(os.Stderr, "mur _confine: write confinement:", err)
			return 126
		}
	}
	err := syscall.Exec(path, argv, env)
	fmt.Fprintf(os.Stderr, "mur _confine: %s: %v\n", path, err)
	return 126
}
