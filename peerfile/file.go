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

// Inspect returns the identity of the regular file p under root: its clean path, size, modification time
// and SHA-256. p is reached through os.Root, so nothing outside root is ever opened; a symbolic link that
// stays inside root is followed. A file that changes while it is read is ErrChanged.
func Inspect(root, p string) (File, error) {
	if err := CheckPath(p); err != nil {
		return File{}, err
	}
	p = filepath.Clean(p)
	r, err := os.OpenRoot(root)
	if err != nil {
		return File{}, fmt.Errorf("opening the export root: %w", err)
	}
	defer r.Close()
	f, fi, err := openRegular(r, p)
	if err != nil {
		return File{}, err
	}
	defer f.Close()
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
// anything else now (grown, rewritten, replaced, a directory, a FIFO, a device, a symbolic link out of the
// root) is ErrChanged.
func Open(root string, f File) (*os.File, error) {
	r, err := os.OpenRoot(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fail(ErrNotFound, "the export root no longer exists")
	}
	if err != nil {
		return nil, fmt.Errorf("opening the export root: %w", err)
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
			file.Close()
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

// openRegular opens p under r without blocking (a FIFO would otherwise wait for a writer) and without
// opening a device, and returns it only if it is a regular file.
func openRegular(r *os.Root, p string) (*os.File, fs.FileInfo, error) {
	li, err := r.Lstat(p)
	if err != nil {
		return nil, nil, classify(err, p)
	}
	if li.Mode()&fs.ModeSymlink == 0 && !li.Mode().IsRegular() {
		return nil, nil, notRegular(p, li.Mode())
	}
	f, err := r.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, classify(err, p)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fail(ErrUnreadable, "%q cannot be read: %v", p, errnoText(err))
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, notRegular(p, fi.Mode())
	}
	return f, fi, nil
}

// classify names why os.Root refused p. os.Root's own refusal of a path that leads outside the root is no
// system error, so an error that carries no errno is that refusal.
func classify(err error, p string) error {
	var errno syscall.Errno
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fail(ErrNotFound, "there is no file %q under the export root", p)
	case errors.Is(err, syscall.ENOTDIR):
		return fail(ErrNotFound, "there is no file %q under the export root: a part of the path is not a directory", p)
	case errors.Is(err, syscall.ELOOP):
		return fail(ErrNotRegular, "%q is a loop of symbolic links, not a regular file", p)
	case errors.As(err, &errno):
		return fail(ErrUnreadable, "%q cannot be opened: %v", p, errno)
	}
	return fail(ErrOutside, "%q leads outside the export root through a symbolic link", p)
}

func notRegular(p string, m fs.FileMode) error {
	what := "not a regular file"
	switch {
	case m.IsDir():
		what = "a directory"
	case m&fs.ModeNamedPipe != 0:
		what = "a named pipe (FIFO)"
	case m&fs.ModeDevice != 0:
		what = "a device"
	case m&fs.ModeSocket != 0:
		what = "a socket"
	case m&fs.ModeSymlink != 0:
		what = "a symbolic link"
	}
	return fail(ErrNotRegular, "%q is %s, not a regular file", p, what)
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
