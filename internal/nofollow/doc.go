// Package nofollow opens files and directories below a directory without following a symbolic link in
// any component below it. It is how the runtime opens a path inside a workdir on a task's behalf: a
// command may have written anything there (a symbolic link to the member's data directory in place of
// out/, a FIFO in place of a file), and nothing it placed may lead the runtime out of the workdir or
// make it block.
//
// A Dir is an open directory. Every path given to its methods is relative, and is walked one component
// at a time with openat(2) and O_NOFOLLOW from the Dir's descriptor: a component that is a symbolic link
// is ErrSymlink, wherever it stands and wherever it points, even inside the Dir. os.Root is not used
// because it follows a link that stays inside its root, and follows links in the root's own path.
//
// Open opens the first Dir by an absolute path that the operator chose: links in that path above its
// last component are the operator's and are followed; the last component must be a directory, not a
// link to one.
//
// Contract: errors are *fs.PathError whose Path is relative to the Dir the call was made on (never an
// absolute path, so it can be shown to a model) and whose Err is ErrSymlink, ErrNotRegular, or a
// syscall.Errno (fs.ErrNotExist and friends match with errors.Is). A Dir is safe for concurrent use;
// Close it once. Linux and other systems with openat(2); imports the standard library and
// golang.org/x/sys only.
package nofollow
