package peerfile

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/murmur-run/murmur/internal/nofollow"
)

// CheckPath reports ErrBadPath unless p names something inside a root: not empty, no NUL byte, not
// absolute, not leading out with "..", at most 4096 bytes.
func CheckPath(p string) error {
	switch {
	case p == "":
		return fail(ErrBadPath, "the path is empty")
	case strings.IndexByte(p, 0) >= 0:
		return fail(ErrBadPath, "the path %q holds a NUL byte", p)
	case len(p) > maxPath:
		return fail(ErrBadPath, "the path is %d bytes long, more than %d", len(p), maxPath)
	case filepath.IsAbs(p):
		return fail(ErrBadPath, "%q is an absolute path", p)
	case !filepath.IsLocal(p):
		return fail(ErrBadPath, "%q climbs out of its root with \"..\"", p)
	}
	return nil
}

// Root is where a member's shared files are: the directory Dir (exports.peer_files) below the workdir.
// The workdir is opened by its path, which the operator chose; Dir and every path below it are walked
// without following a symbolic link, because a command may have replaced any of them with one (out/ made
// a link to the member's data directory would otherwise share the operator token).
type Root struct {
	Workdir string // absolute
	Dir     string // relative to Workdir, such as "out"
}

// IsZero reports whether r names no export root: the member exports nothing.
func (r Root) IsZero() bool { return r.Dir == "" }

// String is the export root as a path, for the operator's log.
func (r Root) String() string { return filepath.Join(r.Workdir, r.Dir) }

// open opens the export root. A root that is a symbolic link, or lies below one, is ErrLink; a root
// that is gone is ErrNotFound; any other failure is the workdir's and carries no kind.
func (r Root) open() (*nofollow.Dir, error) {
	wd, err := nofollow.Open(r.Workdir)
	if err != nil {
		return nil, fmt.Errorf("opening the workdir: %w", err)
	}
	defer wd.Close()
	d, err := wd.Dir(r.Dir)
	switch {
	case errors.Is(err, nofollow.ErrSymlink):
		return nil, fail(ErrLink, "the export root %s is a symbolic link (or lies below one), and the runtime follows no symbolic link inside the workdir", linkName(err, r.Dir))
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return nil, fail(ErrNotFound, "the export root %s is not a directory in the workdir", filepath.ToSlash(r.Dir))
	case err != nil:
		return nil, fmt.Errorf("opening the export root: %w", err)
	}
	return d, nil
}

// Inspect returns the identity of the regular file p under root: its clean path, size, modification time
// and SHA-256. No symbolic link is followed, in the root's own path or below it, so nothing outside the
// root is ever opened; a FIFO, socket or device is refused without being opened. A file that changes
// while it is read is ErrChanged.
func Inspect(root Root, p string) (File, error) {
	if err := CheckPath(p); err != nil {
		return File{}, err
	}
	p = filepath.Clean(p)
	r, err := root.open()
	if err != nil {
		return File{}, err
	}
	defer r.Close()
	f, fi, err := openRegular(r, p)
	if err != nil {
		return File{}, err
	}
	defer func() { _ = f.Close() }() // only read
	digest, n, err := hashFile(f)
	if err != nil {
		return File{}, fail(ErrUnreadable, "%q cannot be read: %v", p, errnoText(err))
	}
	after, err := f.Stat()
	if err != nil || n != fi.Size() || after.Size() != fi.Size() || !after.ModTime().Equal(fi.ModTime()) {
		return File{}, fail(ErrChanged, "%q changed while it was being read", p)
	}
	return File{Path: filepath.ToSlash(p), Size: fi.Size(), ModTime: fi.ModTime().UnixNano(), Digest: digest}, nil
}

// Open opens the file f names under root for reading, at its start, only if it is still the same regular
// file: same size, same modification time, same SHA-256. A file that is gone is ErrNotFound; one that is
// anything else now (grown, rewritten, replaced, a directory, a FIFO, a device, a symbolic link) is
// ErrChanged; a root that became a symbolic link is ErrLink.
func Open(root Root, f File) (*os.File, error) {
	r, err := root.open()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	changed := func(format string, args ...any) error {
		return fail(ErrChanged, "%s changed since the handle was minted: %s", f.Path, fmt.Sprintf(format, args...))
	}
	file, fi, err := openRegular(r, filepath.FromSlash(f.Path))
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, fail(ErrNotFound, "%s is no longer under the export root: it was renamed or deleted", f.Path)
	case err != nil:
		var pe *Error
		if errors.As(err, &pe) {
			return nil, changed("%s", pe.Detail)
		}
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			_ = file.Close() // only read, and already failing: the error returned says what went wrong
		}
	}()
	if fi.Size() != f.Size {
		return nil, changed("it is %d bytes, not %d", fi.Size(), f.Size)
	}
	if fi.ModTime().UnixNano() != f.ModTime {
		return nil, changed("it was modified at %s", fi.ModTime().UTC().Format(time.RFC3339Nano))
	}
	digest, n, err := hashFile(file)
	if err != nil {
		return nil, fail(ErrUnreadable, "%s cannot be read: %v", f.Path, errnoText(err))
	}
	if n != f.Size || digest != f.Digest {
		return nil, changed("its content is not what was shared")
	}
	if _, err := file.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	ok = true
	return file, nil
}

// openRegular opens p under r only if it is a regular file reached through no symbolic link; a FIFO,
// socket or device is not opened at all.
func openRegular(r *nofollow.Dir, p string) (*os.File, fs.FileInfo, error) {
	f, fi, err := r.Open(p)
	var nr *nofollow.NotRegularError
	switch {
	case err == nil:
		return f, fi, nil
	case errors.Is(err, nofollow.ErrSymlink):
		return nil, nil, fail(ErrLink, "%q is reached through the symbolic link %s, and the runtime follows no symbolic link inside the workdir", p, linkName(err, p))
	case errors.As(err, &nr):
		return nil, nil, fail(ErrNotRegular, "%q is %s, not a regular file", p, nofollow.Kind(nr.Mode))
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil, fail(ErrNotFound, "there is no file %q under the export root", p)
	case errors.Is(err, syscall.ENOTDIR):
		return nil, nil, fail(ErrNotFound, "there is no file %q under the export root: a part of the path is not a directory", p)
	}
	return nil, nil, fail(ErrUnreadable, "%q cannot be opened: %v", p, errnoText(err))
}

// linkName is the component of a nofollow error's path that is the link, relative to where it was
// asked; what if the error names none.
func linkName(err error, what string) string {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Path != "" {
		return filepath.ToSlash(pe.Path)
	}
	return filepath.ToSlash(what)
}

func hashFile(f *os.File) ([sha256.Size]byte, int64, error) {
	h := sha256.New()
	n, err := io.Copy(h, f)
	var d [sha256.Size]byte
	copy(d[:], h.Sum(nil))
	return d, n, err
}

// errnoText is err's system error alone, without the path os adds, which may be absolute.
func errnoText(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return "read failed"
}
