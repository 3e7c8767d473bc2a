package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ResolveCommand resolves the program a murmur.yaml command names (a harness's command[0]): a path with
// a slash is the capsule's own, resolved against dir (the capsule directory) unless absolute; a bare
// name is found on the trusted PATH. It must be a regular, executable file; the error says what to write.
func ResolveCommand(dir, name string) (string, error) {
	if !strings.Contains(name, "/") {
		for _, d := range TrustedPath {
			p := filepath.Join(d, name)
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
				return p, nil
			}
		}
		return "", fmt.Errorf("%s is in none of %s; write its absolute path, such as /home/you/.local/bin/%s", name, strings.Join(TrustedPath, ", "), name)
	}
	path := name
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("%s: no such file; write the harness's path, absolute or relative to the capsule directory", path)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("%s is not an executable file; chmod +x it or name another", path)
	}
	return path, nil
}
