package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// TrustedPath is the only PATH shell binaries are resolved on and run with: never the workdir, never a
// PATH a task supplies.
var TrustedPath = []string{"/usr/local/bin", "/usr/bin", "/bin"}

// The defaults of capabilities.shell.
const (
	DefaultShellTimeout = 60 * time.Second
	DefaultShellMemMB   = 1024
	DefaultShellOutKB   = 16
	LingerWait          = 2 * time.Second
)

// ResolveShell finds a bare name on the trusted PATH: the absolute path of a regular, executable file.
func ResolveShell(name string) (string, error) {
	if name == "" || strings.ContainsAny(name, "/\\") || name == "." || name == ".." {
		return "", fmt.Errorf("%q is not a bare program name", name)
	}
	for _, dir := range TrustedPath {
		p := filepath.Join(dir, name)
		fi, err := os.Stat(p)
		if err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("capabilities.shell.allow lists %s, which is in none of %s; install it there or remove it from the list",
		name, strings.Join(TrustedPath, ", "))
}
