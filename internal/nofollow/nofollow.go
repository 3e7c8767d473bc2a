package nofollow

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrSymlink is the error of a path one of whose components is a symbolic link.
var ErrSymlink = errors.New("is a symbolic link, and no symbolic link is followed here")

// ErrNotRegular is the error of a path that names something else where a regular file was asked for;
// the error itself is a *NotRegularError, which says what it is.
var ErrNotRegular = errors.New("is not a regular file")

// NotRegularError says what a path names instead of a regular file. errors.Is matches it with
// ErrNotRegular.
type NotRegularError struct{ Mode fs.FileMode }

func (e *NotRegularError) Error() string { return "is " + Kind(e.Mode) + ", not a regular file" }

// Is makes errors.Is(err, ErrNotRegular) true.
func (e *NotRegularError) Is(target error) bool { return target == ErrNotRegular }

// Kind names the type of file m describes, for a sentence: "a directory", "a named pipe (FIFO)", …
func Kind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "not a regular file"
}

// Dir is an open directory; paths below it are walked without following a symbolic link.
type Dir struct {
	f    *os.File
	name string // for errors: "." for the Dir Open returned, else the path below it
}

const dirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC

// Open opens the directory at path, which the operator chose. Links in path above its last component
// are followed; a last component that is a symbolic link is ErrSymlink. Errors carry path as given.
func Open(path string) (*Dir, error) {
	fd, err := unix.Open(path, dirFlags, 0)
	if err != nil {
		if symlinkAt(unix.AT_FDCWD, path, err) {
			err = ErrSymlink
		}
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return &Dir{f: os.NewFile(uintptr(fd), path), name: "."}, nil
}

// Close closes the directory; call it once, after every other call on d has returned.
func (d *Dir) Close() error { return d.f.Close() }

// Name is the path of d below the Dir Open returned, "." for that one.
func (d *Dir) Name() string { return d.name }

// Dir opens the directory rel below d.
func (d *Dir) Dir(rel string) (*Dir, error) {
	parent, last, err := d.parent("open", rel)
	if err != nil {
		return nil, err
	}
	defer parent.release()
	fd, err := openDirAt(parent.fd, last)
	if err != nil {
		return nil, d.pathErr("open", rel, err)
	}
	return &Dir{f: os.NewFile(uintptr(fd), rel), name: d.join(rel)}, nil
}

// Open opens the regular file rel below d for reading. It never blocks and never opens anything else:
// a FIFO, socket or device is a *NotRegularError (and is not opened), a link is ErrSymlink.
func (d *Dir) Open(rel string) (*os.File, fs.FileInfo, error) {
	parent, last, err := d.parent("open", rel)
	if err != nil {
		return nil, nil, err
	}
	defer parent.release()
	var st unix.Stat_t
	if err := unix.Fstatat(parent.fd, last, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, nil, d.pathErr("open", rel, err)
	}
	if m := modeOf(st.Mode); !m.IsRegular() {
		return nil, nil, d.pathErr("open", rel, notRegular(m))
	}
	fd, err := unix.Openat(parent.fd, last, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		if symlinkAt(parent.fd, last, err) {
			err = ErrSymlink
		}
		return nil, nil, d.pathErr("open", rel, err)
	}
	// Replaced between the look and the open: fstat says what was opened.
	if err := unix.Fstat(fd, &st); err != nil {
		_ = unix.Close(fd) // already failing: the error returned says what went wrong
		return nil, nil, d.pathErr("open", rel, err)
	}
	if m := modeOf(st.Mode); !m.IsRegular() {
		_ = unix.Close(fd) // already failing: the error returned says what went wrong
		return nil, nil, d.pathErr("open", rel, notRegular(m))
	}
	if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err == nil {
		// O_NONBLOCK kept the open from waiting on a FIFO swapped in; a regular file reads the same
		// without it cleared.
		_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl&^unix.O_NONBLOCK)
	}
	return os.NewFile(uintptr(fd), rel), newInfo(filepath.Base(last), &st), nil
}

// OpenFile opens or creates rel below d with flag (os.O_WRONLY|os.O_CREATE|os.O_EXCL, …) and perm. A
// last component that is a link is ErrSymlink; it is not followed, whatever flag says.
func (d *Dir) OpenFile(rel string, flag int, perm fs.FileMode) (*os.File, error) {
	parent, last, err := d.parent("open", rel)
	if err != nil {
		return nil, err
	}
	defer parent.release()
	fd, err := unix.Openat(parent.fd, last, flag|unix.O_NOFOLLOW|unix.O_NOCTTY|unix.O_CLOEXEC, uint32(perm.Perm()))
	if err != nil {
		if symlinkAt(parent.fd, last, err) {
			err = ErrSymlink
		}
		return nil, d.pathErr("open", rel, err)
	}
	return os.NewFile(uintptr(fd), rel), nil
}

// Lstat describes rel below d; a last component that is a link is described, not followed.
func (d *Dir) Lstat(rel string) (fs.FileInfo, error) {
	parent, last, err := d.parent("lstat", rel)
	if err != nil {
		return nil, err
	}
	defer parent.release()
	var st unix.Stat_t
	if err := unix.Fstatat(parent.fd, last, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, d.pathErr("lstat", rel, err)
	}
	return newInfo(filepath.Base(last), &st), nil
}

// MkdirAll makes rel and the directories above it below d, as os.MkdirAll does, refusing to go through
// a link.
func (d *Dir) MkdirAll(rel string, perm fs.FileMode) error {
	parts, err := split(rel)
	if err != nil {
		return d.pathErr("mkdir", rel, err)
	}
	cur := d.fd()
	defer runtime.KeepAlive(d.f)
	owned := -1
	defer func() {
		if owned >= 0 {
			_ = unix.Close(owned) // a directory: nothing was written through it
		}
	}()
	for i, p := range parts {
		if p == "." {
			continue
		}
		if err := unix.Mkdirat(cur, p, uint32(perm.Perm())); err != nil && err != unix.EEXIST {
			return d.pathErr("mkdir", strings.Join(parts[:i+1], "/"), err)
		}
		next, err := openDirAt(cur, p)
		if err != nil {
			return d.pathErr("mkdir", strings.Join(parts[:i+1], "/"), err)
		}
		if owned >= 0 {
			_ = unix.Close(owned) // a directory: nothing was written through it
		}
		owned, cur = next, next
	}
	return nil
}

// Rename renames from to to, both below d.
func (d *Dir) Rename(from, to string) error {
	return d.two("rename", from, to, func(fromFd int, fromLast string, toFd int, toLast string) error {
		return unix.Renameat(fromFd, fromLast, toFd, toLast)
	})
}

// Link makes to a hard link of from, both below d; a from that is a link is linked itself, not followed.
func (d *Dir) Link(from, to string) error {
	return d.two("link", from, to, func(fromFd int, fromLast string, toFd int, toLast string) error {
		return unix.Linkat(fromFd, fromLast, toFd, toLast, 0)
	})
}

// Remove removes the file, link or empty directory rel below d.
func (d *Dir) Remove(rel string) error {
	parent, last, err := d.parent("remove", rel)
	if err != nil {
		return err
	}
	defer parent.release()
	err = unix.Unlinkat(parent.fd, last, 0)
	if err == unix.EISDIR || err == unix.EPERM {
		if e := unix.Unlinkat(parent.fd, last, unix.AT_REMOVEDIR); e == nil || err == unix.EISDIR {
			err = e
		}
	}
	if err != nil {
		return d.pathErr("remove", rel, err)
	}
	return nil
}

// Names lists the names in d, unsorted, without "." and "..".
func (d *Dir) Names() ([]string, error) {
	fd, err := unix.Openat(d.fd(), ".", dirFlags, 0)
	runtime.KeepAlive(d.f)
	if err != nil {
		return nil, d.pathErr("readdir", ".", err)
	}
	f := os.NewFile(uintptr(fd), d.name)
	defer func() { _ = f.Close() }() // a directory, only read
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, d.pathErr("readdir", ".", errnoOf(err))
	}
	return names, nil
}

func (d *Dir) fd() int { return int(d.f.Fd()) }

// join is rel's name below the Dir Open returned.
func (d *Dir) join(rel string) string {
	if d.name == "." {
		return filepath.ToSlash(filepath.Clean(rel))
	}
	return d.name + "/" + filepath.ToSlash(filepath.Clean(rel))
}

func (d *Dir) pathErr(op, rel string, err error) error {
	return &fs.PathError{Op: op, Path: d.join(rel), Err: err}
}

// held is a directory descriptor a walk ended on: d's own, or one the walk opened, which release closes.
type held struct {
	fd    int
	owned bool
	keep  *os.File
}

func (h held) release() {
	if h.owned {
		_ = unix.Close(h.fd) // a directory: nothing was written through it
	}
	runtime.KeepAlive(h.keep)
}

// parent walks to the directory that holds rel's last component and returns it with that component
// ("." when rel is "." itself).
func (d *Dir) parent(op, rel string) (held, string, error) {
	parts, err := split(rel)
	if err != nil {
		return held{}, "", d.pathErr(op, rel, err)
	}
	h := held{fd: d.fd(), keep: d.f}
	for i, p := range parts[:len(parts)-1] {
		next, err := openDirAt(h.fd, p)
		if err != nil {
			h.release()
			return held{}, "", d.pathErr(op, strings.Join(parts[:i+1], "/"), err)
		}
		h.release()
		h = held{fd: next, owned: true, keep: d.f}
	}
	return h, parts[len(parts)-1], nil
}

func (d *Dir) two(op, from, to string, do func(int, string, int, string) error) error {
	pf, lf, err := d.parent(op, from)
	if err != nil {
		return err
	}
	defer pf.release()
	pt, lt, err := d.parent(op, to)
	if err != nil {
		return err
	}
	defer pt.release()
	if err := do(pf.fd, lf, pt.fd, lt); err != nil {
		return &os.LinkError{Op: op, Old: d.join(from), New: d.join(to), Err: err}
	}
	return nil
}

// openDirAt opens the directory name in dirfd, refusing a link.
func openDirAt(dirfd int, name string) (int, error) {
	fd, err := unix.Openat(dirfd, name, dirFlags, 0)
	if err != nil && symlinkAt(dirfd, name, err) {
		return -1, ErrSymlink
	}
	return fd, err
}

// symlinkAt reports whether an open of name in dirfd failed because name is a link (O_NOFOLLOW answers
// ELOOP on Linux, EMLINK on FreeBSD; O_DIRECTORY may answer ENOTDIR first).
func symlinkAt(dirfd int, name string, err error) bool {
	if err != unix.ELOOP && err != unix.EMLINK && err != unix.ENOTDIR {
		return false
	}
	var st unix.Stat_t
	return unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
}

// split checks that rel is a local path and returns its components; "." alone for rel ".".
func split(rel string) ([]string, error) {
	if rel == "" || strings.IndexByte(rel, 0) >= 0 || !filepath.IsLocal(rel) {
		return nil, unix.EINVAL
	}
	return strings.Split(filepath.ToSlash(filepath.Clean(rel)), "/"), nil
}

func notRegular(m fs.FileMode) error {
	if m&fs.ModeSymlink != 0 {
		return ErrSymlink
	}
	return &NotRegularError{Mode: m}
}

func errnoOf(err error) error {
	var en syscall.Errno
	if errors.As(err, &en) {
		return en
	}
	return err
}

// info is an fs.FileInfo from fstatat(2), which os offers only by name.
type info struct {
	name string
	st   unix.Stat_t
}

func newInfo(name string, st *unix.Stat_t) *info { return &info{name: name, st: *st} }

func (i *info) Name() string       { return i.name }
func (i *info) Size() int64        { return i.st.Size }
func (i *info) Mode() fs.FileMode  { return modeOf(i.st.Mode) | fs.FileMode(i.st.Mode&0o777) }
func (i *info) ModTime() time.Time { return time.Unix(i.st.Mtim.Unix()) }
func (i *info) IsDir() bool        { return i.Mode().IsDir() }
func (i *info) Sys() any           { return &i.st }

// modeOf maps the file type bits of a stat mode to fs.FileMode's.
func modeOf(m uint32) fs.FileMode {
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		return fs.ModeDir
	case unix.S_IFLNK:
		return fs.ModeSymlink
	case unix.S_IFIFO:
		return fs.ModeNamedPipe
	case unix.S_IFSOCK:
		return fs.ModeSocket
	case unix.S_IFBLK:
		return fs.ModeDevice
	case unix.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice
	}
	return 0
}

// maxDepth bounds how deep Walk descends, so a tree a command made cannot exhaust descriptors.
const maxDepth = 64

// Walk calls fn with every entry below d that is not a directory (regular files, links, FIFOs, …), in
// lexical order, with its path below d in slashes and its description; it descends into directories and
// never through a link. An error of fn, or of reading a directory, ends the walk with that error; a
// directory nested deeper than 64 levels is not read.
func (d *Dir) Walk(fn func(rel string, fi fs.FileInfo) error) error {
	return d.walk("", fn, 0)
}

func (d *Dir) walk(prefix string, fn func(string, fs.FileInfo) error, depth int) error {
	names, err := d.Names()
	if err != nil {
		return err
	}
	slices.Sort(names)
	for _, name := range names {
		fi, err := d.Lstat(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed while the walk went on
		}
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			if err := fn(prefix+name, fi); err != nil {
				return err
			}
			continue
		}
		if depth >= maxDepth {
			continue
		}
		sub, err := d.Dir(name)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrSymlink) {
			continue // replaced while the walk went on
		}
		if err != nil {
			return err
		}
		err = sub.walk(prefix+name+"/", fn, depth+1)
		sub.Close()
		if err != nil {
			return err
		}
	}
	return nil
}
