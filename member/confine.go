package member

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// ConfineCommand is the hidden first argument that makes the mur binary the confining helper: it sets
// the command's limits and write confinement on itself, then executes the command in its place.
const ConfineCommand = "_confine"

// The helper's instructions, in its environment; it removes them before executing the command.
const (
	envConfineWrite = "MUR_CONFINE_WRITE" // directories the command may write, separated by ':'
	envConfineMem   = "MUR_CONFINE_MEM"   // the address-space limit in bytes; 0 or unset: none
	envConfineLock  = "MUR_CONFINE_LANDLOCK"
)

// LandlockAvailable reports whether the kernel enforces Landlock, so confinement can be applied.
func LandlockAvailable() bool {
	v, err := llsys.LandlockGetABIVersion()
	return err == nil && v >= 1
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
		default:
			env = append(env, kv)
		}
	}
	if mem > 0 {
		lim := &syscall.Rlimit{Cur: mem, Max: mem}
		if err := syscall.Setrlimit(syscall.RLIMIT_AS, lim); err != nil {
			fmt.Fprintln(os.Stderr, "mur _confine: memory limit:", err)
			return 126
		}
	}
	if lock {
		rules := []landlock.Rule{landlock.RODirs("/"), landlock.RWFiles("/dev/null", "/dev/zero", "/dev/full").IgnoreIfMissing()}
		for _, d := range write {
			rules = append(rules, landlock.RWDirs(filepath.Clean(d)))
		}
		if err := landlock.V5.BestEffort().RestrictPaths(rules...); err != nil {
			fmt.Fprintln(os.Stderr, "mur _confine: write confinement:", err)
			return 126
		}
	}
	err := syscall.Exec(path, argv, env)
	fmt.Fprintf(os.Stderr, "mur _confine: %s: %v\n", path, err)
	return 126
}
