package wasm

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"time"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/experimental/sysfs"
	"github.com/tetratelabs/wazero/sys"
	"golang.org/x/sys/unix"
)

// rootFS is the module's view of its workdir, through an os.Root: every path is resolved beneath the
// workdir by the kernel's *at calls, a component at a time, and a symbolic link is followed only while
// it stays inside. wazero's DirFS joins the path to the directory's name and lets the host follow any
// link, so a module could make "esc -> ../../.." and write through it (the test
// TestWorkdirSymlinkCannotLeadOut shows it).
//
// wazero hands every method a path beneath the mount without "..", the module's path cleaned.
type rootFS struct {
	experimentalsys.UnimplementedFS // Chmod: WASI preview 1 has no call that reaches it
	root                            *os.Root
}

var _ experimentalsys.FS = (*rootFS)(nil)

// rel maps wazero's names to os.Root's, which are relative. A path opened from a directory the module
// opened is that directory's name, "/", and the path; the workdir's own name is "" (so "/x"), or ".".
func rel(name string) string {
	name = strings.TrimLeft(name, "/")
	if name == "" {
		return "."
	}
	return name
}

// errnoOf maps an error of os.Root or the kernel to a WASI errno. os.Root's refusal of a path that leads
// out of the workdir is no kernel error: it is EPERM, what wazero answers for a path with "..".
func errnoOf(err error) experimentalsys.Errno {
	if err == nil {
		return 0
	}
	var en syscall.Errno
	if errors.As(err, &en) {
		return experimentalsys.UnwrapOSError(en)
	}
	if e := experimentalsys.UnwrapOSError(err); e != experimentalsys.EIO {
		return e
	}
	return experimentalsys.EPERM
}

// OpenFile opens a file or directory beneath the workdir.
func (r *rootFS) OpenFile(name string, flag experimentalsys.Oflag, perm fs.FileMode) (experimentalsys.File, experimentalsys.Errno) {
	write := flag&(experimentalsys.O_WRONLY|experimentalsys.O_RDWR) != 0
	if flag&experimentalsys.O_DIRECTORY != 0 && write {
		return nil, experimentalsys.EISDIR
	}
	f, err := openChecked(r.root, rel(name), osFlag(flag), perm)
	if err != nil {
		return nil, errnoOf(err)
	}
	return r.adapt(f, rel(name), flag)
}

// openChecked opens name beneath root and keeps it only when it is a regular file or a directory. A FIFO,
// a socket or a device in the workdir (a shell command can make the first two) would let a module wedge
// its call: open(2) of a FIFO waits for the other end, and a read of one, or of a device, waits for data,
// inside a host call wazero cannot interrupt, so neither the time limit nor a cancel would end it. So the
// file is opened with O_NONBLOCK (an open that would wait fails at once, ENXIO, or succeeds at once) and
// O_NOCTTY, checked with fstat on the descriptor itself (what the path names may change between a stat and
// an open; the descriptor cannot), refused when it is anything else, and only then made blocking again,
// which is what a regular file's reads and writes expect. A link is followed as os.Root does, inside the
// workdir, and the check is on what it leads to.
//
// The refusal is ENOTSUP, "not supported": the file exists and the module may see it with stat (which
// never waits), but a tool cannot use it; EACCES would say the permission bits are wrong, and a module (or
// the model reading its error) might then try chmod.
func openChecked(root *os.Root, name string, flag int, perm fs.FileMode) (*os.File, error) {
	f, err := root.OpenFile(name, flag|syscall.O_NONBLOCK|syscall.O_NOCTTY, perm)
	if err != nil {
		if errors.Is(err, syscall.ENXIO) { // a socket; a FIFO opened for writing with no reader; a device without its driver
			return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.ENOTSUP}
		}
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close() // already failing: the error returned says what went wrong
		return nil, err
	}
	if t := fi.Mode().Type(); t != 0 && t != fs.ModeDir {
		_ = f.Close() // already failing: the error returned says what went wrong
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.ENOTSUP}
	}
	if err := setBlocking(f); err != nil {
		_ = f.Close() // already failing: the error returned says what went wrong
		return nil, err
	}
	return f, nil
}

// setBlocking clears O_NONBLOCK on the open descriptor. It goes through SyscallConn rather than Fd, which
// would also change how the os.File itself reads.
func setBlocking(f *os.File) error {
	sc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	err = sc.Control(func(fd uintptr) {
		var fl int
		if fl, ferr = unix.FcntlInt(fd, unix.F_GETFL, 0); ferr == nil && fl&unix.O_NONBLOCK != 0 {
			_, ferr = unix.FcntlInt(fd, unix.F_SETFL, fl&^unix.O_NONBLOCK)
		}
	})
	return errors.Join(err, ferr)
}

// osFlag maps wazero's open flags to the host's. O_NOFOLLOW is left out: os.Root opens every component
// without following and follows a link itself, inside the workdir only. The module's O_NONBLOCK is left
// out too: openChecked opens with it and clears it, since what it keeps (a regular file, a directory)
// never waits.
func osFlag(f experimentalsys.Oflag) int {
	var o int
	switch f & (experimentalsys.O_RDWR | experimentalsys.O_WRONLY) {
	case experimentalsys.O_RDWR:
		o = os.O_RDWR
	case experimentalsys.O_WRONLY:
		o = os.O_WRONLY
	}
	for _, m := range []struct {
		wasi experimentalsys.Oflag
		host int
	}{
		{experimentalsys.O_APPEND, os.O_APPEND},
		{experimentalsys.O_CREAT, os.O_CREATE},
		{experimentalsys.O_EXCL, os.O_EXCL},
		{experimentalsys.O_TRUNC, os.O_TRUNC},
		{experimentalsys.O_SYNC, os.O_SYNC},
		{experimentalsys.O_DSYNC, syscall.O_DSYNC},
		{experimentalsys.O_RSYNC, syscall.O_RSYNC},
		{experimentalsys.O_DIRECTORY, syscall.O_DIRECTORY},
	} {
		if f&m.wasi != 0 {
			o |= m.host
		}
	}
	return o
}

// Lstat stats a path without following a last link.
func (r *rootFS) Lstat(name string) (sys.Stat_t, experimentalsys.Errno) {
	fi, err := r.root.Lstat(rel(name))
	if err != nil {
		return sys.Stat_t{}, errnoOf(err)
	}
	return sys.NewStat_t(fi), 0
}

// Stat stats a path, following links inside the workdir. Unlike OpenFile it shows a FIFO, a socket or a
// device as what it is: stat(2) never waits on one.
func (r *rootFS) Stat(name string) (sys.Stat_t, experimentalsys.Errno) {
	fi, err := r.root.Stat(rel(name))
	if err != nil {
		return sys.Stat_t{}, errnoOf(err)
	}
	return sys.NewStat_t(fi), 0
}

// Mkdir makes a directory.
func (r *rootFS) Mkdir(name string, perm fs.FileMode) experimentalsys.Errno {
	return errnoOf(r.root.Mkdir(rel(name), perm))
}

// Rename renames within the workdir.
func (r *rootFS) Rename(from, to string) experimentalsys.Errno {
	return errnoOf(r.root.Rename(rel(from), rel(to)))
}

// Rmdir removes an empty directory, and only a directory.
func (r *rootFS) Rmdir(name string) experimentalsys.Errno {
	fi, err := r.root.Lstat(rel(name))
	if err != nil {
		return errnoOf(err)
	}
	if !fi.IsDir() {
		return experimentalsys.ENOTDIR
	}
	return errnoOf(r.root.Remove(rel(name)))
}

// Unlink removes a file or link, never a directory.
func (r *rootFS) Unlink(name string) experimentalsys.Errno {
	fi, err := r.root.Lstat(rel(name))
	if err != nil {
		return errnoOf(err)
	}
	if fi.IsDir() {
		return experimentalsys.EISDIR
	}
	return errnoOf(r.root.Remove(rel(name)))
}

// Link makes a hard link; both names are beneath the workdir.
func (r *rootFS) Link(oldName, newName string) experimentalsys.Errno {
	return errnoOf(r.root.Link(rel(oldName), rel(newName)))
}

// Symlink makes a link with any target: following it is what os.Root confines.
func (r *rootFS) Symlink(target, link string) experimentalsys.Errno {
	return errnoOf(r.root.Symlink(target, rel(link)))
}

// Readlink reads a link's target.
func (r *rootFS) Readlink(name string) (string, experimentalsys.Errno) {
	t, err := r.root.Readlink(rel(name))
	if err != nil {
		return "", errnoOf(err)
	}
	return t, 0
}

// Utimens sets a path's times; UTIME_OMIT leaves one as it is.
func (r *rootFS) Utimens(name string, atim, mtim int64) experimentalsys.Errno {
	return errnoOf(r.root.Chtimes(rel(name), timeOf(atim), timeOf(mtim)))
}

// timeOf maps WASI's nanoseconds to os.Chtimes's time, where the zero time leaves the time unchanged.
func timeOf(ns int64) time.Time {
	if ns == experimentalsys.UTIME_OMIT {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// rootFile is a file or directory opened beneath the workdir. Reading, writing, seeking, listing and
// stat are wazero's adapter of an fs.File (sysfs.AdaptFS) over the *os.File that os.Root opened: it
// has the WASI semantics already (a directory rewinds by reopening, through reopener, so through the root
// again), and its Seek keeps this package clear of a Seek with WASI's signature, which go vet's stdmethods
// check refuses. What the adapter leaves out (append mode, truncate, sync, times) is done here on the open
// descriptor, or by name beneath the root.
type rootFile struct {
	experimentalsys.File
	root   *os.Root
	name   string   // beneath root
	f      *os.File // what the adapter reads and writes
	append bool
}

var _ experimentalsys.File = (*rootFile)(nil)

// reopener is the fs.FS the adapter opens its file from: first the file os.Root opened, then, when a
// directory is rewound, the same name opened again beneath the root.
type reopener struct {
	rf     *rootFile
	opened bool
}

func (o *reopener) Open(string) (fs.File, error) {
	if !o.opened {
		o.opened = true
		return o.rf.f, nil
	}
	// The name may now be something else, a FIFO even (a module can rename one into its place): it is
	// opened as OpenFile opens, with O_DIRECTORY, so nothing here waits.
	f, err := openChecked(o.rf.root, o.rf.name, os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.IsDir() {
		_ = f.Close() // already failing: the error returned says what went wrong
		return nil, &fs.PathError{Op: "open", Path: o.rf.name, Err: syscall.ENOTDIR}
	}
	o.rf.f = f // the adapter closes the one it had
	return f, nil
}

func (r *rootFS) adapt(f *os.File, name string, flag experimentalsys.Oflag) (experimentalsys.File, experimentalsys.Errno) {
	rf := &rootFile{root: r.root, name: name, f: f, append: flag&experimentalsys.O_APPEND != 0}
	a, e := (&sysfs.AdaptFS{FS: &reopener{rf: rf}}).OpenFile(name, flag, 0)
	if e != 0 {
		_ = f.Close() // already failing: the errno returned says what went wrong
		return nil, e
	}
	rf.File = a
	return rf, 0
}

// IsAppend reports whether writes append.
func (f *rootFile) IsAppend() bool { return f.append }

// SetAppend turns appending on or off on the open descriptor, so nothing is looked up by name again.
func (f *rootFile) SetAppend(enable bool) experimentalsys.Errno {
	fd := f.f.Fd()
	fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
	if err != nil {
		return errnoOf(err)
	}
	if enable {
		fl |= unix.O_APPEND
	} else {
		fl &^= unix.O_APPEND
	}
	if _, err := unix.FcntlInt(fd, unix.F_SETFL, fl); err != nil {
		return errnoOf(err)
	}
	f.append = enable
	return 0
}

// Truncate sets the file's size.
func (f *rootFile) Truncate(size int64) experimentalsys.Errno {
	if size < 0 {
		return experimentalsys.EINVAL
	}
	return errnoOf(f.f.Truncate(size))
}

// Sync flushes the file to its device.
func (f *rootFile) Sync() experimentalsys.Errno { return errnoOf(f.f.Sync()) }

// Datasync flushes the file's data, and its metadata with it (fdatasync is Linux's alone).
func (f *rootFile) Datasync() experimentalsys.Errno { return f.Sync() }

// Utimens sets the file's times, by its name beneath the workdir.
func (f *rootFile) Utimens(atim, mtim int64) experimentalsys.Errno {
	return errnoOf(f.root.Chtimes(f.name, timeOf(atim), timeOf(mtim)))
}
