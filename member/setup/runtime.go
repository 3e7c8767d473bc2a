package setup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/murmur-run/murmur/internal/ids"
)

// A member's runtime root (<member dir>/run/) holds one directory per live session, named by its
// session id: its tools' copies and manifests, pulled artifacts, the MCP config of a harness. A session
// removes its own at Close (RemoveRuntimeDir); what a killed process left, the member removes when it
// starts, before its first session (ClearRuntimeRoot): nothing of an earlier process is live then, and
// the sub-sessions that share the root start later, each removing only its own. Neither ever follows a
// symbolic link: a root that is one is refused, and a link below it is removed, not followed.

// ErrRuntimeRootLink is the error of a runtime root that is a symbolic link.
var ErrRuntimeRootLink = errors.New("is a symbolic link")

// openRuntimeRoot opens root as an os.Root, whose removals stay inside it. A root that is a symbolic
// link, or is not a directory, is refused; so is one that changed between its check and its opening.
// A missing root is (nil, nil): there is nothing in it.
func openRuntimeRoot(root string) (*os.Root, error) {
	fi, err := os.Lstat(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("runtime directory %s: %w", root, err)
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, fmt.Errorf("runtime directory %s %w: murmur removes the runtime directories of ended sessions in it and follows no link to do so; replace it with a directory (remove the link; murmur makes the directory)", root, ErrRuntimeRootLink)
	case !fi.IsDir():
		return nil, fmt.Errorf("runtime directory %s is not a directory: remove it; murmur makes the directory", root)
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, fmt.Errorf("runtime directory %s: %w", root, err)
	}
	if opened, err := r.Stat("."); err != nil || !os.SameFile(fi, opened) {
		r.Close()
		return nil, fmt.Errorf("runtime directory %s changed while it was opened: nothing was removed; start the member again", root)
	}
	return r, nil
}

// isSessionDir reports whether name is a session's runtime directory: one path element, a session id.
func isSessionDir(name string) bool {
	return strings.HasPrefix(name, ids.PrefixSession) && len(name) > len(ids.PrefixSession) &&
		!strings.ContainsAny(name, `/\`) && name != "." && name != ".."
}

// ClearRuntimeRoot removes every session's runtime directory under root and returns their names. The
// member calls it when it starts, before its first session: the directories are those a killed process
// left, since a session that ends removes its own. An entry that is not named like a session is left
// alone. A missing root is nothing to clear; a root that is a symbolic link is refused
// (ErrRuntimeRootLink).
func ClearRuntimeRoot(root string) ([]string, error) {
	r, err := openRuntimeRoot(root)
	if r == nil || err != nil {
		return nil, err
	}
	defer r.Close()
	d, err := r.Open(".")
	if err != nil {
		return nil, fmt.Errorf("runtime directory %s: %w", root, err)
	}
	names, err := d.Readdirnames(-1)
	_ = d.Close() // a directory, only read
	if err != nil {
		return nil, fmt.Errorf("runtime directory %s: %w", root, err)
	}
	slices.Sort(names)
	var removed []string
	var errs []error
	for _, name := range names {
		if !isSessionDir(name) {
			continue
		}
		if err := r.RemoveAll(name); err != nil {
			errs = append(errs, fmt.Errorf("removing the runtime directory an earlier process left, %s: %w", filepath.Join(root, name), err))
			continue
		}
		removed = append(removed, name)
	}
	return removed, errors.Join(errs...)
}

// RemoveRuntimeDir removes the runtime directory of session under root, for the session's Close. A
// missing directory (a session that staged nothing) or root ("": no runtime root) is nothing to remove.
func RemoveRuntimeDir(root, session string) error {
	if root == "" {
		return nil
	}
	if !isSessionDir(session) {
		return fmt.Errorf("runtime directory: %q is not a session id", session)
	}
	r, err := openRuntimeRoot(root)
	if r == nil || err != nil {
		return err
	}
	defer r.Close()
	if err := r.RemoveAll(session); err != nil {
		return fmt.Errorf("removing the session's runtime directory %s: %w (the member's next start removes it)", filepath.Join(root, session), err)
	}
	return nil
}
