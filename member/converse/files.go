package converse

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/murmur-run/murmur/internal/nofollow"
)

// ArtifactsDir is where, in its workdir, a task writes the files that become its artifacts.
const ArtifactsDir = "out/artifacts"

// InlineMax is the largest file whose bytes an artifact carries inline; a larger one is served by URL.
const InlineMax = 256 << 10

// Stamp is what a file under ArtifactsDir was before a task ran, to tell the files the task wrote.
type Stamp struct {
	Size    int64
	ModTime time.Time
}

// Snapshot stamps every entry but directories under workdir/ArtifactsDir, so Collect reports only what
// a task wrote or changed (none when the directory is missing or is reached through a symbolic link,
// which Collect refuses).
func Snapshot(workdir string) map[string]Stamp {
	out := map[string]Stamp{}
	dir, err := openArtifacts(workdir)
	if err != nil {
		return out
	}
	defer dir.Close()
	// A directory that cannot be read ends the stamps there: Collect then takes the files past it for the
	// task's, showing more rather than fewer, as with no snapshot at all.
	_ = dir.Walk(func(rel string, fi fs.FileInfo) error {
		out[rel] = Stamp{Size: fi.Size(), ModTime: fi.ModTime()}
		return nil
	})
	return out
}

// openArtifacts opens workdir/ArtifactsDir through no symbolic link: a command may have made out/ a link
// to any directory the member can read (another task's kept files, another member's data).
func openArtifacts(workdir string) (*nofollow.Dir, error) {
	wd, err := nofollow.Open(workdir)
	if err != nil {
		return nil, err
	}
	defer wd.Close()
	return wd.Dir(ArtifactsDir)
}

// File is one file a task wrote under ArtifactsDir: inline (Bytes set) or kept for its URL (Kept, the
// copy's path), or refused (Refused says why; nothing of it is read).
type File struct {
	Name      string // the path below ArtifactsDir, with slashes
	MediaType string
	Size      int64
	Bytes     []byte
	Kept      string
	Refused   string
}

// Collect returns the files under workdir/ArtifactsDir that are new or changed since before, in name
// order. A file larger than InlineMax is copied to keep/<name> (its bytes may change in the workdir
// later). No symbolic link is followed, in ArtifactsDir's own path or below it, and nothing but a regular
// file is opened: a link, FIFO, socket or device is refused and not read. When ArtifactsDir itself is
// reached through a link, the one refused File is named ArtifactsDir.
func Collect(workdir string, before map[string]Stamp, keep string) ([]File, error) {
	dir, err := openArtifacts(workdir)
	switch {
	case errors.Is(err, nofollow.ErrSymlink):
		return []File{{Name: ArtifactsDir, MediaType: "text/plain; charset=utf-8", Refused: fmt.Sprintf(
			"%s is a symbolic link, or lies below one (%s), and the runtime follows no symbolic link inside the workdir, so no file under it became an artifact; make %s a directory and write the files themselves into it",
			ArtifactsDir, linkPath(err), ArtifactsDir)}}, nil
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return nil, nil
	case err != nil:
		return nil, err
	}
	defer dir.Close()
	var out []File
	err = dir.Walk(func(name string, info fs.FileInfo) error {
		if st, ok := before[name]; ok && st.Size == info.Size() && st.ModTime.Equal(info.ModTime()) {
			return nil
		}
		f := File{Name: name, MediaType: MediaType(name)}
		if !info.Mode().IsRegular() {
			f.Refused = refusal(name, info.Mode())
			out = append(out, f)
			return nil
		}
		in, info, err := dir.Open(name)
		var nr *nofollow.NotRegularError
		switch {
		case errors.As(err, &nr):
			f.Refused = refusal(name, nr.Mode)
		case errors.Is(err, nofollow.ErrSymlink):
			f.Refused = refusal(name, fs.ModeSymlink)
		case errors.Is(err, fs.ErrNotExist):
			return nil // removed since the walk saw it
		case err != nil:
			return err
		}
		if f.Refused != "" {
			out = append(out, f)
			return nil
		}
		defer func() { _ = in.Close() }() // only read
		f.Size = info.Size()
		if f.Size <= InlineMax {
			if f.Bytes, err = io.ReadAll(io.LimitReader(in, InlineMax+1)); err != nil {
				return err
			}
			f.Size = int64(len(f.Bytes))
		} else {
			f.Kept = filepath.Join(keep, filepath.FromSlash(name))
			if err := copyFile(in, f.Kept); err != nil {
				return err
			}
		}
		out = append(out, f)
		return nil
	})
	return out, err
}

// refusal says why the entry name of type m under ArtifactsDir is no artifact, and what to write instead.
func refusal(name string, m fs.FileMode) string {
	if m&fs.ModeSymlink != 0 {
		return fmt.Sprintf("%s/%s is a symbolic link, and the runtime follows no symbolic link inside the workdir; write the file itself there (cp, not ln -s)", ArtifactsDir, name)
	}
	return fmt.Sprintf("%s/%s is %s, not a regular file; write a file there", ArtifactsDir, name, nofollow.Kind(m))
}

// linkPath is the link a nofollow error names, relative to the workdir.
func linkPath(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Path
	}
	return ArtifactsDir
}

// textTypes are media types of text files that a host's tables may not list (Go's own lists none of
// them); the same on every host.
var textTypes = map[string]string{
	".txt": "text/plain; charset=utf-8", ".md": "text/markdown; charset=utf-8", ".csv": "text/csv; charset=utf-8",
	".log": "text/plain; charset=utf-8", ".yaml": "application/yaml", ".yml": "application/yaml",
}

// MediaType is the media type of a file by its extension; application/octet-stream when unknown.
func MediaType(name string) string {
	ext := strings.ToLower(path.Ext(name))
	if t, ok := textTypes[ext]; ok {
		return t
	}
	if t := mime.TypeByExtension(ext); t != "" {
		return t
	}
	return "application/octet-stream"
}

func copyFile(in io.Reader, to string) error {
	if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
		return err
	}
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close() // already failing: the error returned says what went wrong
		return err
	}
	return out.Close()
}
